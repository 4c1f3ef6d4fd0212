//! Protocol eras and utilities: an older client (2025-06-18, form-only elicitation), a
//! client with no elicitation, an unsupported `MCP-Protocol-Version`, cancellation that stops
//! the upstream request, ping, logging.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest, ElicitationCapability, Implementation,
    ProtocolVersion,
};
use rmcp::service::PeerRequestOptions;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::json;

use crate::helpers::{
    ALICE, Backend, ClientKind, PASSWORD, SpawnOptions, TestApp, eventually, spawn_app, spawn_app_opts,
};

/// A plain client that declares the given version and elicitation capability.
#[derive(Clone)]
struct VersionedClient {
    version: ProtocolVersion,
    elicitation: Option<ElicitationCapability>,
}

impl ClientHandler for VersionedClient {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = self.elicitation.clone();
        ClientConfig::new(capabilities, Implementation::new("versioned-client", "1.0.0"))
            .with_protocol_version(self.version.clone())
    }
}

async fn connect(
    app: &TestApp,
    client: VersionedClient,
) -> rmcp::service::RunningService<rmcp::RoleClient, VersionedClient> {
    let token = app.token_for(ALICE).await;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(app.mcp_url()).auth_header(token),
    );
    client.serve(transport).await.unwrap()
}

fn params(name: &str, arguments: serde_json::Value) -> CallToolRequestParams {
    let mut p = CallToolRequestParams::new(name.to_owned());
    p.arguments = arguments.as_object().cloned();
    p
}

#[tokio::test]
async fn every_supported_version_is_negotiated_and_old_clients_get_the_link_as_text() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    for version in [
        ProtocolVersion::V_2024_11_05,
        ProtocolVersion::V_2025_03_26,
        ProtocolVersion::V_2025_06_18,
        ProtocolVersion::V_2025_11_25,
    ] {
        // 2025-06-18 clients know only form elicitation (`elicitation: {}`).
        let client = connect(
            &app,
            VersionedClient { version: version.clone(), elicitation: Some(ElicitationCapability::new()) },
        )
        .await;
        let negotiated = client.peer().peer_info().unwrap().protocol_version.clone();
        assert_eq!(negotiated, version, "the server echoes a version it supports");
        let result = client
            .peer()
            .call_tool(params("connect_account", json!({"provider": "demo", "scopes": ["profile"]})))
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(true), "{version:?}");
        let text = format!("{:?}", result.content);
        assert!(text.contains("/connect/"), "the link as text for {version:?}: {text}");
        let other = client
            .peer()
            .call_tool(params("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})))
            .await;
        assert!(other.is_ok(), "no -32042 for a client without URL mode ({version:?})");
        client.cancel().await.unwrap();
    }
    app.stop().await;
}

#[tokio::test]
async fn an_unsupported_protocol_version_header_is_refused_with_400() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let token = app.token_for(ALICE).await;
    let http = app.http();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let response = http
        .post(app.mcp_url())
        .bearer_auth(&token)
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let bad = http
        .post(app.mcp_url())
        .bearer_auth(&token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "1999-01-01")
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let good = http
        .post(app.mcp_url())
        .bearer_auth(&token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(good.status(), 200, "ping answers");
    app.stop().await;
}

#[tokio::test]
async fn a_cancelled_tool_call_stops_its_upstream_request() {
    // Arrange: a provider that holds its answer until released (never, here), connected.
    let mut provider = crate::helpers::holding_provider::holding_provider().await;
    let options = SpawnOptions { toml: provider.toml(), ..Default::default() };
    let app = spawn_app_opts(Backend::Sqlite, options, |b| b).await.unwrap();
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let hold = json!({"provider": "slow", "method": "GET", "path": "/hold"});
    let url = match client.call("provider_request", hold.clone()).await {
        Err(rmcp::ServiceError::McpError(e)) => e.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned(),
        other => panic!("expected -32042, got {other:?}"),
    };
    crate::helpers::holding_provider::connect_in_browser(&app.url(""), &url, ALICE, PASSWORD).await;

    // Act: the call is cancelled once its upstream request has reached the provider.
    let request = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params("provider_request", hold)));
    let handle = client.peer().send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), provider.arrived.recv())
        .await
        .expect("the call reached the provider");
    handle.cancel(Some("user changed their mind".into())).await.unwrap();

    // Assert: the broker drops its upstream request; the provider sees its caller go away
    // (without the cancellation it would have waited for ever).
    tokio::time::timeout(Duration::from_secs(20), provider.abandoned.recv())
        .await
        .expect("the upstream request was not cancelled");
    // The session still works afterwards.
    let ok = client.call("list_connections", json!({})).await.unwrap();
    assert_ne!(ok.is_error, Some(true));
    app.stop().await;
}

#[tokio::test]
async fn a_stateless_2026_07_28_client_gets_an_input_required_result_never_url_elicitation_required() {
    use rmcp::model::{CallToolResponse, InputRequest};
    use rmcp::{ClientLifecycleMode, ClientServiceExt};
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let token = app.token_for(ALICE).await;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(app.mcp_url()).auth_header(token),
    );
    let url_capable = ElicitationCapability::new().with_url(rmcp::model::UrlElicitationCapability::default());
    let client = VersionedClient { version: ProtocolVersion::V_2026_07_28, elicitation: Some(url_capable) }
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
        )
        .await
        .unwrap();
    for tool in ["provider_request", "connect_account"] {
        let args = json!({"provider": "demo", "method": "GET", "path": "/me"});
        let args = if tool == "connect_account" { json!({"provider": "demo"}) } else { args };
        // One round only (`call_tool_once`): the result as the server sent it.
        match client.peer().call_tool_once(params(tool, args)).await {
            Ok(CallToolResponse::InputRequired(result)) => {
                let requests = result.input_requests.expect("an input request");
                let Some(InputRequest::Elicitation(request)) = requests.get("authorize") else {
                    panic!("{tool}: a url elicitation under `authorize`, got {requests:?}");
                };
                match &request.params {
                    rmcp::model::ElicitRequestParams::UrlElicitationParams { url, .. } => {
                        assert!(url.starts_with(&app.url("/connect/")), "{tool}: {url}");
                    }
                    other => panic!("{tool}: expected url mode, got {other:?}"),
                }
                assert!(result.request_state.is_some_and(|s| !s.is_empty()), "{tool}: a requestState");
            }
            other => panic!("{tool}: expected an InputRequiredResult, got {other:?}"),
        }
    }
    client.cancel().await.unwrap();
    app.stop().await;
}

/// Records `notifications/message` (logging is deprecated for 2026-07-28, not for 2025-11-25).
#[derive(Clone, Default)]
struct LoggingClient {
    messages: std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
}

#[allow(deprecated)]
impl ClientHandler for LoggingClient {
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _ctx: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.messages.lock().unwrap().push(serde_json::to_value(&params).unwrap());
    }
}

#[allow(deprecated)]
#[tokio::test]
async fn logging_follows_the_sessions_level_and_never_carries_a_secret() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    // Connect the demo provider first (through the real browser flow).
    let _connected = app.connected_client(ALICE).await;
    let token = app.token_for(ALICE).await;
    let handler = LoggingClient::default();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(app.mcp_url()).auth_header(token.clone()),
    );
    let client = handler.clone().serve(transport).await.unwrap();
    let me = params("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"}));
    // A 404 at the provider: reported at warning level.
    let missing = params("provider_request", json!({"provider": "demo", "method": "GET", "path": "/missing"}));
    let logged_at_least = |count: usize| {
        let messages = handler.messages.clone();
        async move {
            eventually(&format!("{count} logging message(s) arrive"), Duration::from_secs(10), move || {
                let logged = messages.lock().unwrap().clone();
                async move { (logged.len() >= count).then_some(logged) }
            })
            .await
        }
    };

    // No level asked for: nothing is sent. Warning: an info-level success stays quiet, a
    // failure is reported. A message travels on its request's stream ahead of the answer
    // (`logging_notification` in src/mcp/server.rs), so whatever the earlier calls sent would
    // arrive before the warning: the warning being the first message proves they sent none.
    client.peer().call_tool(me.clone()).await.unwrap();
    client.peer().set_level(rmcp::model::SetLevelRequestParams::new(rmcp::model::LoggingLevel::Warning)).await.unwrap();
    client.peer().call_tool(me.clone()).await.unwrap();
    client.peer().call_tool(missing).await.unwrap();
    let logged = logged_at_least(1).await;
    assert_eq!(
        logged[0]["data"]["path"], "/missing",
        "no logging before logging/setLevel, info is below warning: {logged:?}"
    );
    assert_eq!((&logged[0]["level"], &logged[0]["data"]["status"]), (&json!("warning"), &json!(404)), "{logged:?}");

    // Info: the success is reported.
    client.peer().set_level(rmcp::model::SetLevelRequestParams::new(rmcp::model::LoggingLevel::Info)).await.unwrap();
    client.peer().call_tool(me).await.unwrap();
    let logged = logged_at_least(2).await;
    assert_eq!(logged.len(), 2, "{logged:?}");
    assert_eq!(logged[1]["data"]["status"], 200);
    assert_eq!(logged[1]["data"]["path"], "/me");
    let user = app.user_id(ALICE).await;
    let grant = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
    let owner = format!("{user}/demo");
    let ctx =
        oauth_broker::crypto::SealContext { table: "grants", column: "access_token", row_id: &grant.id, owner: &owner };
    let access = String::from_utf8(app.state.core.sealer.open(&grant.access_token_sealed, ctx).unwrap()).unwrap();
    let text = serde_json::to_string(&logged).unwrap();
    assert!(!text.contains(&access) && !text.contains(&token), "no secret in a log message");
    client.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn a_malformed_body_gets_a_json_rpc_parse_error_not_415() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let token = app.token_for(ALICE).await;
    let post = |body: &'static str, token: Option<&str>| {
        let mut request = app
            .http()
            .post(app.mcp_url())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    for (body, code) in [
        (r#"{"jsonrpc": "2.0", "id": 1, "method": "#, -32700),
        ("not json at all", -32700),
        (r#"{"hello": "world"}"#, -32600),
        (r#"[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]"#, -32600),
        (r#"{"jsonrpc": "1.0", "id": 1, "method": "ping"}"#, -32600),
    ] {
        let response = post(body, Some(&token)).await.unwrap();
        assert_eq!(response.status(), 400, "{body}");
        let answer: serde_json::Value = response.json().await.unwrap();
        assert_eq!(answer["jsonrpc"], "2.0");
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
        assert!(answer["id"].is_null(), "{answer}");
    }
    // Without a token the answer is still 401, whatever the body.
    assert_eq!(post("not json", None).await.unwrap().status(), 401);
    // A well-formed message still reaches the server.
    let init = r#"{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}"#;
    assert_eq!(post(init, Some(&token)).await.unwrap().status(), 200);
    app.stop().await;
}
