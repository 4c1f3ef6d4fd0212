//! Gateway mode (issue 26), `--auth token-exchange`: the example tool server
//! (`examples/tool_server.rs`, unchanged, in its own process) sits behind the broker, tied to
//! its registered token-API service. Each call carries a token the broker minted for the
//! calling user and that service; the tool server exchanges it at `/token` with its own service
//! credentials, so the user's consent for the service and their provider connection gate it.

use std::time::Duration;

use base64::Engine;
use oauth_broker::crypto::OneTimeSecret;
use serde_json::{Value, json};

use crate::helpers::gateway::{servers_cli, servers_ok, tool_names};
use crate::helpers::token_api::{
    ServiceOptions, ToolServer, register_service, register_service_with, url_elicitation_required,
};
use crate::helpers::*;
use crate::on_both_backends;

const TOOL: &str = "tools_whoami_at_demo";

/// The example tool server as service `tools` (provider demo, its MCP URL as resource), behind
/// the broker as server `tools`, registered with the admin CLI.
async fn tool_server_behind_the_broker(app: &TestApp) -> ToolServer {
    let secret = OneTimeSecret::generate("obs_", 32);
    let tool_server = ToolServer::start(app, "svc_tools", secret.expose_plaintext(), "exchange").await;
    let options = ServiceOptions { resource: Some(&tool_server.mcp_url), ..Default::default() };
    register_service_with(app, "tools", &["demo"], options, &secret).await;
    servers_ok(app, &["add", "tools", "--url", &tool_server.mcp_url, "--auth", "token-exchange", "--service", "tools"])
        .await;
    eventually("the broker serves the new server", Duration::from_secs(10), || async {
        crate::helpers::gateway::served(app, "tools_").await
    })
    .await;
    tool_server
}

async fn server_id(app: &TestApp) -> String {
    app.state.core.store.gateway_servers().by_name("tools").await.unwrap().unwrap().id
}

/// The claims of a JWT, unverified (the test reads what the broker put in).
fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

/// `name`'s 2025-11-25 client approves the (client, server) pair, connects the server, and
/// gets the broker's link for the demo provider from the tool server, which it approves at
/// the provider as `account`. Returns the client, with the tool listed.
async fn connect_and_approve(app: &TestApp, name: &str, account: &str) -> McpClient {
    let client = app.mcp_client(name, ClientKind::Url).await;
    let browser = app.browser();
    // The (client, server) pair first, as for every server behind the broker: through the
    // connect tool while no one has connected the server yet, else through the tool itself.
    if tool_names(&client).await.contains(&"tools_connect".to_owned()) {
        let (_, url) = url_elicitation_required(client.call("tools_connect", json!({})).await);
        app.allow_in_browser(&browser, &url, name).await;
        let connected = client.call("tools_connect", json!({})).await.unwrap();
        assert_ne!(connected.is_error, Some(true), "{connected:?}");
        assert!(tool_names(&client).await.contains(&TOOL.to_owned()));
    } else {
        let (_, url) = url_elicitation_required(client.call(TOOL, json!({})).await);
        let html = app.allow_in_browser(&browser, &url, name).await;
        assert!(html.contains("Allow this client to call tools?"), "the pair first: {html}");
    }
    // The tool server's exchange answers "connect demo first": its link is the broker's own,
    // and the broker shows it as its own.
    let (_, url) = url_elicitation_required(client.call(TOOL, json!({})).await);
    assert!(url.starts_with(&app.url("/connect/")), "the broker's own page: {url}");
    let page = {
        let path = url.strip_prefix(&app.address).unwrap();
        assert_eq!(app.sign_in(&browser, name, path).await.status(), 303);
        browser.get(&url).send().await.unwrap().text().await.unwrap()
    };
    assert!(page.contains("tools"), "the page names the tool server's service: {page}");
    let callback = app.approve_in_browser_as(&browser, &url, name, account).await;
    assert!(callback.status().is_success(), "{}", callback.status());
    client
}

fn shown(result: &rmcp::model::CallToolResult) -> String {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    serde_json::to_string(result).unwrap()
}

async fn a_call_reaches_the_provider_through_the_tool_servers_own_exchange(app: &TestApp) {
    // Arrange
    let tool_server = tool_server_behind_the_broker(app).await;

    // Act: alice connects; then the call goes through.
    let client = connect_and_approve(app, ALICE, "alice-demo").await;
    let result = client.call(TOOL, json!({})).await.unwrap();

    // Assert: the provider's answer for alice's account; the consent is the service's.
    assert!(shown(&result).contains("alice-demo"), "{result:?}");
    let alice = app.user_id(ALICE).await;
    let consents = app.state.core.store.consents().for_user(&alice).await.unwrap();
    assert!(consents.iter().any(|c| c.client_key == "service:svc_tools"), "{consents:?}");

    // The token the broker sent is for the service's resource and alice, short-lived.
    let token = app.gateway.minted.cached(&alice, &server_id(app).await).expect("a token was minted");
    let claims = claims(&token);
    assert_eq!(claims["aud"], tool_server.mcp_url.as_str());
    assert_eq!(claims["sub"], app.state.core.store.users().by_id(&alice).await.unwrap().unwrap().subject.as_str());
    assert!(claims["client_label"].as_str().unwrap().starts_with("token:"), "bound to the calling client: {claims}");
    assert!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap() <= 300);

    // A second call reuses it.
    client.call(TOOL, json!({})).await.unwrap();
    assert_eq!(app.gateway.minted.cached(&alice, &server_id(app).await).as_deref(), Some(token.as_str()));

    // The registration was audited, with the service.
    let entries = app.state.core.store.audit().entries(None, 200).await.unwrap();
    let added = entries.iter().find(|e| e.action == "gateway_server.added").expect("audited");
    assert!(added.detail.as_deref().unwrap().contains("auth=token_exchange service_id="), "{added:?}");

    client.close().await;
    tool_server.stop().await;
}
on_both_backends!(end_to_end_2025, a_call_reaches_the_provider_through_the_tool_servers_own_exchange);

async fn a_2026_client_gets_both_links_by_round_trip_and_the_retry_reaches_the_provider(app: &TestApp) {
    let tool_server = tool_server_behind_the_broker(app).await;
    let client = std::sync::Arc::new(app.mcp_client_2026(ALICE, ClientKind::Url).await);
    let browser = app.browser();

    // The pair, by round trip.
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.call("tools_connect", json!({})).await }
    });
    let (url, _) = client.next_url_elicitation().await;
    app.allow_in_browser(&browser, &url, ALICE).await;
    let connected = call.await.unwrap().expect("connected after the browser");
    assert_ne!(connected.is_error, Some(true), "{connected:?}");

    // The tool server's link for the demo provider, by round trip; the retry gets the answer.
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.call(TOOL, json!({})).await }
    });
    let (url, _) = client.next_url_elicitation().await;
    assert!(url.starts_with(&app.url("/connect/")), "the broker's own page: {url}");
    assert!(app.approve_in_browser_as(&browser, &url, ALICE, "alice-demo").await.status().is_success());
    let result = call.await.unwrap().expect("the provider's answer after the browser");
    assert!(shown(&result).contains("alice-demo"), "{result:?}");
    tool_server.stop().await;
}
on_both_backends!(end_to_end_2026, a_2026_client_gets_both_links_by_round_trip_and_the_retry_reaches_the_provider);

async fn two_users_get_their_own_tokens_and_their_own_accounts(app: &TestApp) {
    let tool_server = tool_server_behind_the_broker(app).await;
    let alice_client = connect_and_approve(app, ALICE, "alice-demo").await;
    let bob_client = connect_and_approve(app, BOB, "bob-demo").await;

    let (alice_result, bob_result) = tokio::join!(alice_client.call(TOOL, json!({})), bob_client.call(TOOL, json!({})));
    let (alice_shown, bob_shown) = (shown(&alice_result.unwrap()), shown(&bob_result.unwrap()));
    assert!(alice_shown.contains("alice-demo") && !alice_shown.contains("bob-demo"), "{alice_shown}");
    assert!(bob_shown.contains("bob-demo") && !bob_shown.contains("alice-demo"), "{bob_shown}");

    let server = server_id(app).await;
    let (alice, bob) = (app.user_id(ALICE).await, app.user_id(BOB).await);
    let alice_token = app.gateway.minted.cached(&alice, &server).unwrap();
    let bob_token = app.gateway.minted.cached(&bob, &server).unwrap();
    assert_ne!(alice_token, bob_token);
    assert_ne!(claims(&alice_token)["sub"], claims(&bob_token)["sub"]);

    alice_client.close().await;
    bob_client.close().await;
    tool_server.stop().await;
}
on_both_backends!(two_users, two_users_get_their_own_tokens_and_their_own_accounts);

/// RFC 8693 exchange at `/token` with `credentials`.
async fn exchange(app: &TestApp, client_id: &str, secret: &str, token: &str) -> (u16, Value) {
    let response = app
        .http()
        .post(app.url("/token"))
        .basic_auth(client_id, Some(secret))
        .form(&[
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"),
            ("subject_token", token),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:access_token"),
            ("provider", "demo"),
        ])
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

async fn a_token_minted_for_one_server_is_refused_with_another_services_credentials(app: &TestApp) {
    let tool_server = tool_server_behind_the_broker(app).await;
    let client = connect_and_approve(app, ALICE, "alice-demo").await;
    shown(&client.call(TOOL, json!({})).await.unwrap());
    let alice = app.user_id(ALICE).await;
    let token = app.gateway.minted.cached(&alice, &server_id(app).await).unwrap();
    let other = register_service(
        app,
        "other",
        &["demo"],
        ServiceOptions { resource: Some("https://other.example/mcp"), ..Default::default() },
    )
    .await;

    let (status, body) = exchange(app, &other.client_id, &other.secret, &token).await;

    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"], "invalid_subject_token", "{body}");
    assert!(body.get("access_token").is_none());

    client.close().await;
    tool_server.stop().await;
}
on_both_backends!(other_service_refused, a_token_minted_for_one_server_is_refused_with_another_services_credentials);

async fn withdrawing_the_services_consent_or_removing_the_service_stops_the_next_call(app: &TestApp) {
    let tool_server = tool_server_behind_the_broker(app).await;
    let client = connect_and_approve(app, ALICE, "alice-demo").await;
    shown(&client.call(TOOL, json!({})).await.unwrap());
    let alice = app.user_id(ALICE).await;

    // Withdrawn consent: the next call gets the broker's link again, not the provider's answer.
    assert!(app.state.core.store.consents().revoke_client(&alice, "service:svc_tools").await.unwrap() > 0);
    let (_, url) = url_elicitation_required(client.call(TOOL, json!({})).await);
    assert!(url.starts_with(&app.url("/connect/")), "{url}");
    let html = app.allow_in_browser(&app.browser(), &url, ALICE).await;
    assert!(html.contains("tools"), "{html}");
    shown(&client.call(TOOL, json!({})).await.unwrap());

    // Removed service (by the operator's CLI, another process): once the broker has heard of
    // it, the next call is refused, saying why.
    let service = app.state.core.store.services().by_name("tools").await.unwrap().unwrap();
    let removed =
        crate::helpers::cli::broker_for(app).args(["admin", "services", "remove", "tools"]).output().await.unwrap();
    assert!(removed.status.success(), "{}", String::from_utf8_lossy(&removed.stderr));
    eventually("the broker hears of the removal", Duration::from_secs(10), || async {
        app.state.core.store.services().by_id(&service.id).await.unwrap().is_none()
    })
    .await;
    let refused = client.call(TOOL, json!({})).await.unwrap();
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    let text = serde_json::to_string(&refused.content).unwrap();
    assert!(text.contains("service this server is tied to was removed"), "{text}");

    client.close().await;
    tool_server.stop().await;
}
on_both_backends!(revoked, withdrawing_the_services_consent_or_removing_the_service_stops_the_next_call);

#[tokio::test]
async fn registering_names_an_existing_service_with_a_resource_and_says_what_is_wrong() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let add = |extra: &'static [&'static str]| {
        let mut args = vec!["add", "tools", "--url", "http://127.0.0.1:9/mcp", "--auth", "token-exchange"];
        args.extend_from_slice(extra);
        args
    };
    let refused = |output: std::process::Output| {
        assert!(!output.status.success());
        String::from_utf8_lossy(&output.stderr).into_owned()
    };

    let missing = refused(servers_cli(&app, &add(&[]), None).await);
    assert!(missing.contains("--auth token-exchange needs --service NAME"), "{missing}");
    let unknown = refused(servers_cli(&app, &add(&["--service", "nope"]), None).await);
    assert!(unknown.contains("--service nope: no such service"), "{unknown}");
    register_service(&app, "bare", &["demo"], ServiceOptions::default()).await;
    let bare = refused(servers_cli(&app, &add(&["--service", "nope"]), None).await);
    assert!(bare.contains("registered: bare"), "{bare}");
    let no_resource = refused(servers_cli(&app, &add(&["--service", "bare"]), None).await);
    assert!(no_resource.contains("has no registered resource"), "{no_resource}");
    let wrong_kind = refused(
        servers_cli(
            &app,
            &["add", "x", "--url", "http://127.0.0.1:9/mcp", "--auth", "none", "--service", "bare"],
            None,
        )
        .await,
    );
    assert!(wrong_kind.contains("--service goes only with --auth token-exchange"), "{wrong_kind}");
    assert!(app.state.core.store.gateway_servers().list().await.unwrap().is_empty(), "nothing written");
    app.stop().await;
}
