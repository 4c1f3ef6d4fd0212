//! Gateway mode (issue 26): registering servers (every bad value refused in the operator's
//! words, audited), a server removed while clients listen, a server that goes down mid-call.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::helpers::gateway::{
    ToolListChangeCounter, Upstream, add_provider_server, servers_cli, servers_ok, tool_names,
    withdraw_on_connections_page,
};
use crate::helpers::*;
use crate::on_both_backends;

async fn refused(app: &TestApp, args: &[&str], stdin: Option<&str>) -> String {
    let output = servers_cli(app, args, stdin).await;
    assert!(!output.status.success(), "{args:?} was accepted");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

async fn every_bad_value_is_refused_in_the_operators_words_and_a_good_one_is_audited(app: &TestApp) {
    let url = "http://127.0.0.1:9/mcp";
    let cases: &[(&[&str], &str)] = &[
        (&["add", "Bad_Name", "--url", url, "--auth", "none"], "a server name is 1-32 characters"),
        (&["add", "x", "--url", "not a url", "--auth", "none"], "is not an absolute URL"),
        (&["add", "x", "--url", "http://tools.example/mcp", "--auth", "none"], "must use https"),
        (&["add", "x", "--url", "https://u:p@tools.example/mcp", "--auth", "none"], "must not carry user info"),
        (&["add", "x", "--url", url, "--auth", "none", "--prefix", "a.b"], "a tool prefix is 1-64 characters"),
        (&["add", "x", "--url", url, "--auth", "provider"], "needs --provider"),
        (&["add", "x", "--url", url, "--auth", "provider", "--provider", "nope"], "configured providers: demo"),
        (&["add", "x", "--url", url, "--auth", "provider", "--provider", "demo", "--scopes", "root"], "root"),
        (
            &["add", "x", "--url", url, "--auth", "provider", "--provider", "demo", "--header", "Mcp-Session-Id"],
            "the broker sets it itself",
        ),
        (
            &["add", "x", "--url", url, "--auth", "provider", "--provider", "demo", "--scheme", "Two words"],
            "a scheme is a single word",
        ),
        (
            &["add", "x", "--url", url, "--auth", "none", "--provider", "demo"],
            "--provider goes only with --auth provider",
        ),
        (&["add", "x", "--url", url, "--auth", "none", "--header", "X-Key"], "--header goes only with"),
        (&["add", "x", "--url", url, "--auth", "secret-header"], "needs --header NAME"),
        (
            &[
                "add",
                "x",
                "--url",
                url,
                "--auth",
                "secret-header",
                "--header",
                "X-Key",
                "--secret-env",
                "NO_SUCH_VAR_26",
            ],
            "no such environment variable",
        ),
    ];
    for (args, expected) in cases {
        let error = refused(app, args, None).await;
        assert!(error.contains(expected), "{args:?}: expected {expected:?} in {error}");
    }
    let empty =
        refused(app, &["add", "x", "--url", url, "--auth", "secret-header", "--header", "X-Key"], Some("")).await;
    assert!(empty.contains("the secret is empty"), "{empty}");
    assert!(app.state.core.store.gateway_servers().list().await.unwrap().is_empty(), "nothing was written");

    // A good one is written and audited; its name and an overlapping prefix are then taken.
    servers_ok(
        app,
        &["add", "my-notes", "--url", url, "--auth", "provider", "--provider", "demo", "--scopes", "profile"],
    )
    .await;
    let taken = refused(app, &["add", "my-notes", "--url", url, "--auth", "none", "--prefix", "other_"], None).await;
    assert!(taken.contains("a server named my-notes already exists"), "{taken}");
    let overlap = refused(app, &["add", "mine", "--url", url, "--auth", "none", "--prefix", "my_notes_x_"], None).await;
    assert!(overlap.contains("overlaps server my-notes's prefix my_notes_"), "{overlap}");
    let listed: serde_json::Value = serde_json::from_str(&servers_ok(app, &["list", "--json"]).await).unwrap();
    assert_eq!(
        listed,
        json!([{
            "name": "my-notes", "url": url, "prefix": "my_notes_", "auth": "provider", "provider": "demo",
            "scopes": ["profile"], "header": "Authorization", "scheme": "Bearer",
            "created_at": listed[0]["created_at"],
            // Nobody connected it: nothing is known of its lists yet; its resources are each
            // user's own, never kept.
            "lists": {
                "tools": null, "tools_changed_at": null, "prompts": null, "resources": null,
                "resources_per_user": true, "resource_templates": null
            }
        }])
    );
    let missing = refused(app, &["remove", "nope"], None).await;
    assert!(missing.contains("no server named nope"), "{missing}");
    servers_ok(app, &["remove", "my-notes"]).await;
    let audit = app.state.core.store.audit().entries(None, 50).await.unwrap();
    let actions: Vec<&str> = audit.iter().map(|e| e.action.as_str()).collect();
    assert!(actions.contains(&"gateway_server.added") && actions.contains(&"gateway_server.removed"), "{actions:?}");
    let added = audit.iter().find(|e| e.action == "gateway_server.added").unwrap();
    assert_eq!(added.actor.as_deref(), Some("cli"));
    assert!(added.detail.as_deref().unwrap().contains("server=my-notes"), "{added:?}");
}
on_both_backends!(registering, every_bad_value_is_refused_in_the_operators_words_and_a_good_one_is_audited);

async fn a_removed_servers_tools_disappear_and_listening_clients_are_told(app: &TestApp) {
    // Arrange: an open server behind the broker, its tools listed; a client listening.
    let upstream = Upstream::start(&[], None).await;
    servers_ok(app, &["add", "gone", "--url", &upstream.mcp_url, "--auth", "none"]).await;
    // The broker fetches an open server's tools once it is added and tells the clients then:
    // the listening client connects only after that, so the only notification it can hear is
    // the removal's.
    eventually("the broker has fetched the server's tools", Duration::from_secs(10), || async {
        let probe = app.mcp_client(ALICE, ClientKind::Url).await;
        let listed = crate::helpers::gateway::tool_names(&probe).await.iter().any(|n| n == "gone_echo");
        probe.close().await;
        listed
    })
    .await;
    let counting = ToolListChangeCounter::default();
    let token = app.token_for(ALICE).await;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(app.mcp_url()).auth_header(token),
    );
    let client = counting.clone().serve_with_lifecycle(transport, ClientLifecycleMode::Initialize).await.unwrap();
    eventually("the server's tools are listed", Duration::from_secs(10), || async {
        client.peer().list_all_tools().await.unwrap().iter().any(|t| t.name == "gone_echo")
    })
    .await;
    let info = client.peer().peer_info().unwrap();
    assert_eq!(info.capabilities.tools.as_ref().unwrap().list_changed, Some(true), "declared");
    let heard = counting.0.load(Ordering::SeqCst);

    // Act: the operator removes it (another process).
    servers_ok(app, &["remove", "gone"]).await;

    // Assert: the tools are gone and the client was told.
    eventually("the client hears that the tool list changed", Duration::from_secs(10), || async {
        counting.0.load(Ordering::SeqCst) > heard
    })
    .await;
    let names: Vec<String> =
        client.peer().list_all_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect();
    assert!(!names.iter().any(|n| n.starts_with("gone_")), "{names:?}");
    let call = client.peer().call_tool(rmcp::model::CallToolRequestParams::new("gone_echo")).await;
    assert!(matches!(call, Err(rmcp::ServiceError::McpError(ref e)) if e.message.contains("unknown tool")), "{call:?}");
    let _ = client.cancel().await;
    upstream.stop().await;
}
on_both_backends!(removed, a_removed_servers_tools_disappear_and_listening_clients_are_told);

async fn a_server_that_goes_down_mid_call_gets_a_retryable_error_and_is_reconnected_later(app: &TestApp) {
    // Arrange: alice connected, a `slow` call running.
    let mut upstream = Upstream::bearer(app).await;
    let address = upstream.mcp_url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    add_provider_server(app, "notes", &upstream).await;
    let client = Arc::new(app.mcp_client(ALICE, ClientKind::Url).await);
    crate::helpers::gateway::connect_through_link(app, &client, "notes_connect", ALICE, "alice-demo").await;
    assert_ne!(client.call("notes_connect", json!({})).await.unwrap().is_error, Some(true));
    let slow = tokio::spawn({
        let client = client.clone();
        async move { client.call("notes_slow", json!({})).await }
    });
    upstream.printed("slow started").await;

    // Act: the server goes away.
    upstream.stop().await;

    // Assert: the waiting call answers a retryable error naming the server, not a hang.
    let answer = slow.await.unwrap().unwrap();
    assert_eq!(answer.is_error, Some(true), "{answer:?}");
    let structured = answer.structured_content.unwrap();
    assert_eq!(structured["error"], "server_unavailable");
    assert_eq!(structured["server"], "notes");
    assert!(structured["retryAfter"].as_u64().unwrap() >= 1);
    let again = client.call("notes_echo", json!({"text": "x"})).await.unwrap();
    assert_eq!(again.structured_content.unwrap()["error"], "server_unavailable", "still down");

    // The server comes back on the same address: the next call opens a new connection.
    let back = Upstream::start(&["--listen", &address, "--require-bearer", &app.url("/demo-provider")], None).await;
    let echoed = client.call("notes_echo", json!({"text": "back"})).await.unwrap();
    assert_eq!(echoed.structured_content.unwrap()["text"], "back");
    let names = tool_names(&client).await;
    assert!(names.contains(&"notes_echo".to_owned()));
    back.stop().await;
}
on_both_backends!(down_mid_call, a_server_that_goes_down_mid_call_gets_a_retryable_error_and_is_reconnected_later);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_postgres_serve_the_same_servers_and_either_answers_a_connected_user() {
    // Arrange: two instances on one PostgreSQL database; a server registered by the CLI.
    let Some(a) = spawn_app(Backend::Postgres).await else { return };
    let options = SpawnOptions { instance_of: Some(a.instance()), ..Default::default() };
    let b = spawn_app_opts(Backend::Postgres, options, |builder| builder).await.unwrap();
    let upstream = Upstream::bearer(&a).await;
    add_provider_server(&a, "notes", &upstream).await;
    eventually("the other instance serves the server too", Duration::from_secs(10), || {
        crate::helpers::gateway::served(&b, "notes_")
    })
    .await;

    // Act: alice connects through instance a, then calls through instance b.
    let on_a = a.mcp_client(ALICE, ClientKind::Url).await;
    crate::helpers::gateway::connect_through_link(&a, &on_a, "notes_connect", ALICE, "alice-demo").await;
    assert_ne!(on_a.call("notes_connect", json!({})).await.unwrap().is_error, Some(true));
    let on_b = b.mcp_client(ALICE, ClientKind::Url).await;

    // Assert: b lists the tools a read (shared through the database) and needs no new link
    // (the grant is shared); the call goes over alice's own connection of b's and answers as
    // her.
    eventually("b lists the tools a read", Duration::from_secs(10), || async {
        crate::helpers::gateway::tool_names(&on_b).await.contains(&"notes_whoami".to_owned())
    })
    .await;
    let result = on_b.call("notes_whoami", json!({})).await.unwrap();
    assert_eq!(crate::helpers::gateway::account_of(&result), "alice-demo");
    // Twice: b's answer now comes from what it holds in memory.
    assert_eq!(crate::helpers::gateway::account_of(&on_b.call("notes_whoami", json!({})).await.unwrap()), "alice-demo");

    // Alice withdraws the client's approval for the server on a's page: b, which had it in
    // memory, asks for it again from its caches' next poll of the database on (another
    // process's change, src/store/machinery/generations.rs).
    withdraw_on_connections_page(&a, ALICE).await;
    eventually("b asks for the withdrawn approval again", Duration::from_secs(5), || async {
        matches!(on_b.call("notes_whoami", json!({})).await, Err(rmcp::ServiceError::McpError(e)) if e.code.0 == -32042)
    })
    .await;

    // A removal reaches both instances.
    servers_ok(&a, &["remove", "notes"]).await;
    eventually("b no longer serves the server", Duration::from_secs(10), || async {
        !crate::helpers::gateway::served(&b, "notes_").await
    })
    .await;
    on_a.close().await;
    on_b.close().await;
    upstream.stop().await;
    b.stop().await;
    a.stop().await;
}
