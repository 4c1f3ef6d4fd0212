//! Gateway mode (issue 26, item 2): the prompts, resources and templates of a server behind the
//! broker, listed beside the broker's own and fetched from the server with the calling user's
//! own credential. The server is `examples/upstream_server.rs` in its own process.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::model::{
    GetPromptRequestParams, GetPromptResult, ReadResourceRequestParams, ReadResourceResult, ResourceContents,
};
use rmcp::service::ClientLifecycleMode;
use rmcp::service::ClientServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::helpers::gateway::{ListChangeCounter, Upstream, add_provider_server, connect_through_link, tool_names};
use crate::helpers::*;
use crate::on_both_backends;

async fn get_prompt(
    client: &McpClient,
    name: &str,
    arguments: serde_json::Value,
) -> Result<GetPromptResult, rmcp::ServiceError> {
    let mut params = GetPromptRequestParams::new(name);
    params.arguments = arguments.as_object().cloned();
    // The service's helper drives 2026-07-28 rounds through the client's handler.
    client.service.get_prompt(params).await
}

async fn read(client: &McpClient, uri: &str) -> Result<ReadResourceResult, rmcp::ServiceError> {
    client.service.read_resource(ReadResourceRequestParams::new(uri)).await
}

fn prompt_text(result: &GetPromptResult) -> String {
    serde_json::to_value(&result.messages).unwrap()[0]["content"]["text"].as_str().unwrap().to_owned()
}

/// The one text content of a read: (its URI, its text).
fn contents(result: &ReadResourceResult) -> (String, String) {
    match &result.contents[..] {
        [ResourceContents::TextResourceContents { uri, text, .. }] => (uri.clone(), text.clone()),
        other => panic!("one text content expected: {other:?}"),
    }
}

fn error_of<T: std::fmt::Debug>(result: Result<T, rmcp::ServiceError>) -> rmcp::model::ErrorData {
    match result {
        Err(rmcp::ServiceError::McpError(error)) => error,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

async fn prompt_names(client: &McpClient) -> Vec<String> {
    client.peer().list_all_prompts().await.unwrap().into_iter().map(|p| p.name).collect()
}

async fn resource_uris(client: &McpClient) -> Vec<String> {
    client.peer().list_all_resources().await.unwrap().into_iter().map(|r| r.uri).collect()
}

async fn a_servers_prompts_and_resources_are_listed_beside_the_brokers_own_and_answered_with_each_users_credential(
    app: &TestApp,
) {
    // Arrange: a server that takes a demo-provider token, behind the broker; alice connects it.
    let upstream = Upstream::bearer(app).await;
    add_provider_server(app, "notes", &upstream).await;
    let alice = app.mcp_client(ALICE, ClientKind::Url).await;
    assert!(!prompt_names(&alice).await.iter().any(|n| n.starts_with("notes_")), "unknown before anyone connected");
    connect_through_link(app, &alice, "notes_connect", ALICE, "alice-demo").await;
    assert_ne!(alice.call("notes_connect", json!({})).await.unwrap().is_error, Some(true));

    // Assert: listed under the server's prefix and scheme, after the broker's own.
    let prompts = alice.peer().list_all_prompts().await.unwrap();
    let greeting = prompts.iter().find(|p| p.name == "notes_greeting").expect("the server's prompt is listed");
    assert_eq!(greeting.arguments.as_ref().unwrap()[0].name, "name");
    assert!(prompts.iter().position(|p| p.name == "notes_greeting") > Some(0), "the broker's own come first");
    let uris = resource_uris(&alice).await;
    assert!(uris.contains(&"broker://connections".to_owned()), "{uris:?}");
    assert!(uris.contains(&"gateway://notes/note://whoami".to_owned()), "{uris:?}");
    assert!(uris.contains(&"gateway://notes/note://inbox/alice-demo".to_owned()), "her own: {uris:?}");
    let templates = alice.peer().list_all_resource_templates().await.unwrap();
    assert!(templates.iter().any(|t| t.uri_template == "gateway://notes/note://echo/{text}"), "{templates:?}");

    // Act + Assert: the prompt and the resource come from the server, with alice's credential.
    let greeted = get_prompt(&alice, "notes_greeting", json!({"name": "Bob"})).await.unwrap();
    assert_eq!(prompt_text(&greeted), "Greet Bob on behalf of alice-demo.");
    let (uri, text) = contents(&read(&alice, "gateway://notes/note://whoami").await.unwrap());
    assert_eq!(uri, "gateway://notes/note://whoami", "the contents name the URI the client knows");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap()["account"], "alice-demo");
    let (_, echoed) = contents(&read(&alice, "gateway://notes/note://echo/a%20b").await.unwrap());
    assert_eq!(echoed, "a%20b", "a template expands as the server's own");

    // The broker checks a prompt's arguments as for its own; unknown servers are not found;
    // the server's own errors are passed on, naming it.
    assert_eq!(error_of(get_prompt(&alice, "notes_greeting", json!({})).await).code.0, -32602);
    for unknown in ["gateway://nobody/note://whoami", "gateway://Notes/note://whoami", "gateway://notes"] {
        assert_eq!(error_of(read(&alice, unknown).await).code.0, -32002, "{unknown}");
    }
    let missing = error_of(read(&alice, "gateway://notes/note://nothing").await);
    assert_eq!((missing.code.0, missing.data.unwrap()["server"].clone()), (-32002, json!("notes")));

    // Bob has approved nothing: he sees the server's prompts and templates (descriptions), but
    // none of its resources — a server that acts as the user lists that user's own data —, and
    // listing asks him nothing.
    let bob = app.mcp_client(BOB, ClientKind::Url).await;
    let uris = resource_uris(&bob).await;
    assert!(!uris.iter().any(|u| u.starts_with("gateway://notes/")), "none of the server's resources: {uris:?}");
    let templates = bob.peer().list_all_resource_templates().await.unwrap();
    assert!(templates.iter().any(|t| t.uri_template == "gateway://notes/note://echo/{text}"), "{templates:?}");
    assert!(prompt_names(&bob).await.contains(&"notes_greeting".to_owned()));
    // Nor does the database keep alice's list for anyone.
    let server = app.state.core.store.gateway_servers().by_name("notes").await.unwrap().unwrap().id;
    let stored = app.state.core.store.gateway_lists().of(&server).await.unwrap();
    assert!(stored.iter().any(|l| l.listed.contains("note://echo/{text}")), "the templates are stored");
    assert!(stored.iter().all(|l| !l.listed.contains("inbox") && !l.listed.contains("alice")), "{stored:?}");

    // His first prompt gets the broker's own link (-32042); after the browser, his own
    // credential reaches the server, never alice's.
    let asked = error_of(get_prompt(&bob, "notes_greeting", json!({"name": "Al"})).await);
    assert_eq!(asked.code.0, -32042, "{asked:?}");
    let url = asked.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();
    assert!(url.starts_with(&app.url("/connect/")), "the broker's own page: {url}");
    assert_eq!(app.approve_in_browser_as(&app.browser(), &url, BOB, "bob-demo").await.status(), 200);
    let greeted = get_prompt(&bob, "notes_greeting", json!({"name": "Al"})).await.unwrap();
    assert_eq!(prompt_text(&greeted), "Greet Al on behalf of bob-demo.");
    let (_, text) = contents(&read(&bob, "gateway://notes/note://whoami").await.unwrap());
    assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap()["account"], "bob-demo");
    // Now he lists his own resources, read with his credential; alice's are still hers.
    let (bobs, alices) = (resource_uris(&bob).await, resource_uris(&alice).await);
    assert!(bobs.contains(&"gateway://notes/note://inbox/bob-demo".to_owned()), "{bobs:?}");
    assert!(!bobs.iter().any(|u| u.contains("alice")), "{bobs:?}");
    assert!(alices.contains(&"gateway://notes/note://inbox/alice-demo".to_owned()), "{alices:?}");
    assert!(!alices.iter().any(|u| u.contains("bob")), "{alices:?}");
    // The operator's page of the server says so rather than counting one user's.
    let admin = crate::helpers::admin::admin_browser(app).await;
    let page = admin.get(app.url(&format!("/admin/servers/{server}"))).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("each user&#39;s own, read when they list (templates: 1)"), "{page}");

    // Audited and counted per server, without arguments or URIs.
    app.state.core.store.audit_queue().flush().await;
    let entries = app.state.core.store.audit().entries(Some(&app.user_id(ALICE).await), 100).await.unwrap();
    let details: Vec<String> =
        entries.iter().filter(|e| e.action == "gateway.call").filter_map(|e| e.detail.clone()).collect();
    assert!(details.iter().any(|d| d.contains("server=notes prompt=greeting outcome=ok")), "{details:?}");
    assert!(details.iter().any(|d| d.contains("server=notes resource=read outcome=ok")), "{details:?}");
    assert!(details.iter().all(|d| !d.contains("Bob") && !d.contains("whoami ")), "{details:?}");
    let metrics = oauth_broker::telemetry::render().expect("the metrics recorder is installed");
    assert!(metrics.contains(r#"oauth_broker_gateway_calls_total{server="notes",outcome="ok"}"#), "{metrics}");

    // A server that is down: a clear, retryable error naming it.
    upstream.stop().await;
    let down = error_of(read(&alice, "gateway://notes/note://whoami").await);
    assert_eq!(down.code.0, -32603);
    let data = down.data.unwrap();
    assert_eq!((data["error"].clone(), data["server"].clone()), (json!("server_unavailable"), json!("notes")));
    assert!(data["retryAfter"].as_u64().unwrap() > 0);
    alice.close().await;
    bob.close().await;
}
on_both_backends!(
    listed_and_read_2025,
    a_servers_prompts_and_resources_are_listed_beside_the_brokers_own_and_answered_with_each_users_credential
);

async fn a_servers_list_change_is_read_again_and_passed_on_to_listening_clients(app: &TestApp) {
    // Arrange: the server behind the broker, alice connected; another client of hers listening.
    let upstream = Upstream::bearer(app).await;
    add_provider_server(app, "notes", &upstream).await;
    let alice = app.mcp_client(ALICE, ClientKind::Url).await;
    connect_through_link(app, &alice, "notes_connect", ALICE, "alice-demo").await;
    assert_ne!(alice.call("notes_connect", json!({})).await.unwrap().is_error, Some(true));
    let counting = ListChangeCounter::default();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(app.mcp_url()).auth_header(app.token_for(ALICE).await),
    );
    let listener = counting.clone().serve_with_lifecycle(transport, ClientLifecycleMode::Initialize).await.unwrap();
    let info = listener.peer().peer_info().unwrap();
    assert_eq!(info.capabilities.resources.as_ref().unwrap().list_changed, Some(true), "declared");
    // Its first request binds its session, whose stream relays the notifications from then on.
    assert!(!listener.peer().list_all_resources().await.unwrap().iter().any(|r| r.uri.contains("note://notes/")));

    // Act: a tool of the server adds a note and says its lists changed.
    let added = alice.call("notes_add_note", json!({"title": "n1"})).await.unwrap();
    assert_ne!(added.is_error, Some(true), "{added:?}");

    // Assert: the broker read the lists again and told the listening client.
    eventually("the listener heard both list changes", Duration::from_secs(10), || async {
        counting.prompts.load(Ordering::SeqCst) > 0 && counting.resources.load(Ordering::SeqCst) > 0
    })
    .await;
    let uris: Vec<String> = listener.peer().list_all_resources().await.unwrap().into_iter().map(|r| r.uri).collect();
    assert!(uris.contains(&"gateway://notes/note://notes/n1".to_owned()), "{uris:?}");
    assert!(prompt_names(&alice).await.contains(&"notes_note_n1".to_owned()));
    assert!(tool_names(&alice).await.contains(&"notes_add_note".to_owned()));
    let _ = listener.cancel().await;
    alice.close().await;
    upstream.stop().await;
}
on_both_backends!(list_changed, a_servers_list_change_is_read_again_and_passed_on_to_listening_clients);

/// Pages of `page_size` (2) walk the broker's prompts and the server's as one list.
async fn the_merged_lists_are_paginated_as_the_brokers_own(backend: Backend) {
    let options = SpawnOptions { toml: "page_size = 2\n".into(), ..Default::default() };
    let Some(owned) = spawn_app_opts(backend, options, |builder| builder).await else { return };
    let app = &owned;
    let upstream = Upstream::start(&[], None).await;
    crate::helpers::gateway::servers_ok(app, &["add", "open-notes", "--url", &upstream.mcp_url, "--auth", "none"])
        .await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    eventually("the server's resources are listed", Duration::from_secs(10), || async {
        resource_uris(&client).await.contains(&"gateway://open-notes/note://whoami".to_owned())
    })
    .await;
    let mut cursor = None;
    let mut walked = Vec::new();
    loop {
        let mut params = rmcp::model::PaginatedRequestParams::default();
        params.cursor = cursor;
        let page = client.peer().list_prompts(Some(params)).await.unwrap();
        assert!(page.prompts.len() <= app.state.core.config.page_size, "one page at a time");
        walked.extend(page.prompts.into_iter().map(|p| p.name));
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(walked, prompt_names(&client).await, "the pages make the whole list");
    assert!(walked.contains(&"open_notes_greeting".to_owned()), "{walked:?}");
    assert!(walked.len() > 2, "more than one page: {walked:?}");
    client.close().await;
    upstream.stop().await;
    owned.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paginated_sqlite() {
    the_merged_lists_are_paginated_as_the_brokers_own(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paginated_postgres() {
    the_merged_lists_are_paginated_as_the_brokers_own(Backend::Postgres).await;
}

async fn a_2026_client_gets_a_servers_prompt_after_the_round_trip_and_reads_its_resource(app: &TestApp) {
    // Arrange: alice has connected the server (its lists are known); bob, a stateless
    // 2026-07-28 client, has approved nothing.
    let upstream = Upstream::bearer(app).await;
    add_provider_server(app, "notes", &upstream).await;
    let alice = app.mcp_client(ALICE, ClientKind::Url).await;
    connect_through_link(app, &alice, "notes_connect", ALICE, "alice-demo").await;
    assert_ne!(alice.call("notes_connect", json!({})).await.unwrap().is_error, Some(true));
    alice.close().await;
    let bob = Arc::new(app.mcp_client_2026(BOB, ClientKind::Url).await);

    // Act: the prompt gets the broker's link by round trip; bob approves; the retry proceeds.
    let got = tokio::spawn({
        let bob = bob.clone();
        async move { get_prompt(&bob, "notes_greeting", json!({"name": "Cy"})).await }
    });
    let (url, _) = bob.next_url_elicitation().await;
    assert!(url.starts_with(&app.url("/connect/")), "the broker's own page: {url}");
    assert_eq!(app.approve_in_browser_as(&app.browser(), &url, BOB, "bob-demo").await.status(), 200);
    let greeted = got.await.unwrap().expect("the server's prompt after the browser");

    // Assert: bob's own credential reached the server, for the prompt and for a read.
    assert_eq!(prompt_text(&greeted), "Greet Cy on behalf of bob-demo.");
    let (_, text) = contents(&read(&bob, "gateway://notes/note://whoami").await.unwrap());
    assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap()["account"], "bob-demo");
    // A stateless client lists its user's own resources too, read with his credential.
    let uris = resource_uris(&bob).await;
    assert!(uris.contains(&"gateway://notes/note://inbox/bob-demo".to_owned()), "{uris:?}");
    assert!(!uris.iter().any(|u| u.contains("alice")), "{uris:?}");
    upstream.stop().await;
}
on_both_backends!(round_trip_2026, a_2026_client_gets_a_servers_prompt_after_the_round_trip_and_reads_its_resource);

/// Each user's own resources of a server that acts as the user are read when they list; a
/// server that stops answering is left out of the list within the wait (its templates and the
/// broker's own resources are still listed), and left out for a while rather than waited for
/// on every list.
async fn a_server_that_stops_answering_is_left_out_of_users_lists_not_waited_for(backend: Backend) {
    use crate::helpers::db_proxy::{DbProxy, Mode};

    // Arrange: the server behind a proxy the test can freeze; the shortest call timeout; alice
    // connected, her own resources listed.
    let options = SpawnOptions { toml: "[gateway]\ncall_timeout = \"1s\"\n".into(), ..Default::default() };
    let Some(owned) = spawn_app_opts(backend, options, |builder| builder).await else { return };
    let app = &owned;
    let upstream = Upstream::bearer(app).await;
    let address = upstream.mcp_url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let proxy = DbProxy::start(address).await;
    let url = format!("http://{}/mcp", proxy.addr);
    crate::helpers::gateway::servers_ok(
        app,
        &["add", "notes", "--url", &url, "--auth", "provider", "--provider", "demo", "--scopes", "profile"],
    )
    .await;
    eventually("the broker serves the server", Duration::from_secs(10), || {
        crate::helpers::gateway::served(app, "notes_")
    })
    .await;
    let alice = app.mcp_client(ALICE, ClientKind::Url).await;
    connect_through_link(app, &alice, "notes_connect", ALICE, "alice-demo").await;
    assert_ne!(alice.call("notes_connect", json!({})).await.unwrap().is_error, Some(true));
    assert!(resource_uris(&alice).await.contains(&"gateway://notes/note://inbox/alice-demo".to_owned()));

    // Act: the network path to the server goes silent (sockets open, nothing flows).
    proxy.set(Mode::Freeze);
    let uris = resource_uris(&alice).await;

    // Assert: the list came back without the server's resources, with the broker's own; its
    // templates are the server's shared list, still there.
    assert!(uris.contains(&"broker://connections".to_owned()), "{uris:?}");
    assert!(!uris.iter().any(|u| u.starts_with("gateway://notes/")), "{uris:?}");
    let templates = alice.peer().list_all_resource_templates().await.unwrap();
    assert!(templates.iter().any(|t| t.uri_template == "gateway://notes/note://echo/{text}"), "{templates:?}");
    // The server answers again, but lists leave it out for a while rather than ask it at once.
    proxy.set(Mode::Forward);
    let uris = resource_uris(&alice).await;
    assert!(!uris.iter().any(|u| u.starts_with("gateway://notes/")), "paused: {uris:?}");
    // Its calls are not paused: the gates' own timeout and retryable answer cover them.
    eventually("alice's calls reach the server again", Duration::from_secs(10), || async {
        let echoed = alice.call("notes_echo", json!({"text": "back"})).await.unwrap();
        echoed.structured_content.is_some_and(|s| s["text"] == "back")
    })
    .await;
    alice.close().await;
    upstream.stop().await;
    owned.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_is_left_out_of_lists_sqlite() {
    a_server_that_stops_answering_is_left_out_of_users_lists_not_waited_for(Backend::Sqlite).await;
}
