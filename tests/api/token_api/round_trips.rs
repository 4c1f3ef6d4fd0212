//! The example tool server (`examples/tool_server.rs`, its own process) with MCP 2026-07-28
//! clients: "the user must approve" is an `InputRequiredResult` (the broker's link and a sealed
//! `requestState`), the client's retry waits for the user and gets the provider's answer; a
//! decline ends it; a state that is tampered with, or echoed by another user or for other
//! arguments, is refused with `-32602` and changes nothing.

use std::time::Duration;

use oauth_broker::crypto::OneTimeSecret;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ErrorData, Implementation, ProtocolVersion, UrlElicitationCapability,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::helpers::token_api::{ServiceOptions, ToolServer, register_service_with, user_token_for};
use crate::helpers::*;
use crate::on_both_backends;

const TOOL: &str = "whoami_at_demo";

/// A 2026-07-28 client that opens URLs: it records each URL request (message, url) and answers
/// it with `action`, as a client would after showing the user the link.
#[derive(Clone)]
struct StatelessClient {
    action: ElicitationAction,
    links: mpsc::UnboundedSender<(String, String)>,
}

impl ClientHandler for StatelessClient {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::new().with_url(UrlElicitationCapability::default()));
        ClientConfig::new(capabilities, Implementation::new("stateless-client", "1.0.0"))
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::UrlElicitationParams { message, url, .. } = request {
            let _ = self.links.send((message, url));
        }
        Ok(ElicitResult::new(self.action.clone()))
    }
}

type Client = RunningService<RoleClient, StatelessClient>;

/// A stateless client of the tool server (`server/discover`, no session) and the links it is shown.
async fn stateless_client(
    mcp_url: &str,
    token: &str,
    action: ElicitationAction,
) -> (Client, mpsc::UnboundedReceiver<(String, String)>) {
    let (links, shown) = mpsc::unbounded_channel();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(mcp_url.to_owned()).auth_header(token),
    );
    let client = StatelessClient { action, links }
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
        )
        .await
        .unwrap();
    (client, shown)
}

/// The next link the client was shown.
async fn next_link(shown: &mut mpsc::UnboundedReceiver<(String, String)>) -> (String, String) {
    tokio::time::timeout(Duration::from_secs(30), shown.recv()).await.expect("a URL request").unwrap()
}

/// A tool server registered for `demo`, with extra command-line arguments.
async fn tool_server(app: &TestApp, extra: &[&str]) -> ToolServer {
    let secret = OneTimeSecret::generate("obs_", 32);
    let server = ToolServer::start_with(app, "svc_whoami", secret.expose_plaintext(), "exchange", extra).await;
    let options = ServiceOptions { resource: Some(&server.mcp_url), ..Default::default() };
    register_service_with(app, "whoami", &["demo"], options, &secret).await;
    server
}

/// One raw stateless `tools/call` (a 2026-07-28 client that opens URLs), for the tests that must
/// see or change what goes over the wire: the JSON-RPC answer.
async fn raw_call(mcp_url: &str, token: &str, params: Value) -> Value {
    raw_call_declaring(mcp_url, token, params, json!({"elicitation": {"url": {}}})).await
}

/// [`raw_call`] from a client with these capabilities.
async fn raw_call_declaring(mcp_url: &str, token: &str, params: Value, capabilities: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw-client", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    // A new JSON-RPC id each time, as a retry must have.
    static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let response = reqwest::Client::new()
        .post(mcp_url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", TOOL)
        .timeout(Duration::from_secs(60))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    // JSON, or SSE whose data lines hold the answer.
    std::iter::once(text.as_str())
        .chain(text.lines().filter_map(|line| line.strip_prefix("data:")))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message.get("id") == Some(&json!(id)))
        .unwrap_or_else(|| panic!("an answer in {text}"))
}

/// The first answer to a raw call: (the link, the requestState).
fn input_required(answer: &Value) -> (String, String) {
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "one request: {answer}");
    let (_, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["mode"], "url");
    // 2026-07-28 has no elicitationId (rmcp 3.11 writes the removed field as "": nothing to
    // correlate by; the requestState does that).
    assert!(request["params"].get("elicitationId").is_none_or(|id| id == ""), "{answer}");
    assert!(!answer.to_string().contains("-32042"), "{answer}");
    let state = result["requestState"].as_str().expect("a requestState").to_owned();
    (request["params"]["url"].as_str().unwrap().to_owned(), state)
}

fn retry(state: &str, responses: Option<Value>) -> Value {
    let mut params = json!({"name": TOOL, "arguments": {}, "requestState": state});
    if let Some(responses) = responses {
        params["inputResponses"] = responses;
    }
    params
}

async fn the_client_driver_gets_the_answer_after_the_browser_flow(app: &TestApp) {
    // Arrange: alice's 2026-07-28 client, the tool server, demo not connected yet.
    let server = tool_server(app, &[]).await;
    let token = user_token_for(app, ALICE, &server.mcp_url).await;
    let (client, mut shown) = stateless_client(&server.mcp_url, &token, ElicitationAction::Accept).await;

    // Act: rmcp's own MRTR driver runs the call: it shows the link (our handler accepts), then
    // retries with the state; the retry waits at the tool server while alice approves.
    let call = tokio::spawn(async move {
        let result = client.call_tool(CallToolRequestParams::new(TOOL)).await;
        let _ = client.cancel().await;
        result
    });
    let (message, url) = next_link(&mut shown).await;
    assert!(url.starts_with(&app.url("/connect/")), "the broker's own page: {url}");
    assert!(message.contains("demo"), "names the provider: {message}");
    assert!(message.contains("Connect"), "says why: {message}");
    let browser = app.browser();
    let callback = app.approve_in_browser(&browser, &url, ALICE).await;
    assert!(callback.status().is_success(), "{}", callback.status());

    // Assert: the same call returns the provider's answer; the link was shown once.
    let result = tokio::time::timeout(Duration::from_secs(60), call).await.unwrap().unwrap().unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let shown_answer = serde_json::to_string(&result).unwrap();
    assert!(shown_answer.contains("demo-user"), "the provider's answer: {shown_answer}");
    assert!(shown.try_recv().is_err(), "no second link");
    server.stop().await;
}
on_both_backends!(tool_server_mrtr_end_to_end, the_client_driver_gets_the_answer_after_the_browser_flow);

#[tokio::test]
async fn a_decline_ends_the_call_at_once_with_a_clear_error() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let server = tool_server(&app, &[]).await;
    let token = user_token_for(&app, ALICE, &server.mcp_url).await;
    let (client, mut shown) = stateless_client(&server.mcp_url, &token, ElicitationAction::Decline).await;

    // The driver shows the link, the user declines, the retry carries the decline.
    let result = client.call_tool(CallToolRequestParams::new(TOOL)).await.unwrap();

    assert_eq!(result.is_error, Some(true), "{result:?}");
    let text = serde_json::to_string(&result.content).unwrap();
    assert!(text.contains("did not approve"), "{text}");
    next_link(&mut shown).await;
    let _ = client.cancel().await;
    server.stop().await;
    app.stop().await;
}

#[tokio::test]
async fn an_open_authorization_gets_the_state_again_without_a_second_link() {
    // `--input-wait 0s`: a retry looks once and answers.
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let server = tool_server(&app, &["--input-wait", "0s"]).await;
    let token = user_token_for(&app, ALICE, &server.mcp_url).await;
    let (url, state) = input_required(&raw_call(&server.mcp_url, &token, json!({"name": TOOL, "arguments": {}})).await);

    let accepted = json!({"authorize": {"action": "accept"}});
    let again = raw_call(&server.mcp_url, &token, retry(&state, Some(accepted))).await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    assert_eq!(again["result"]["requestState"], state.as_str(), "the same state");
    assert!(again["result"].get("inputRequests").is_none(), "no second link: {again}");
    assert!(!again.to_string().contains("-32042"), "{again}");

    // Once alice has approved, a retry with the state (no answer this round) gets the result.
    let browser = app.browser();
    app.approve_in_browser(&browser, &url, ALICE).await;
    let done = raw_call(&server.mcp_url, &token, retry(&state, None)).await;
    assert_eq!(done["result"]["structuredContent"]["account"], "demo-user", "{done}");
    server.stop().await;
    app.stop().await;
}

#[tokio::test]
async fn a_denial_on_the_consent_page_ends_the_waiting_retry_with_a_clear_error() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let server = tool_server(&app, &[]).await;
    let token = user_token_for(&app, ALICE, &server.mcp_url).await;
    let (url, state) = input_required(&raw_call(&server.mcp_url, &token, json!({"name": TOOL, "arguments": {}})).await);
    // The client accepted (it opened the page); alice then denies there.
    let browser = app.browser();
    let path = url.strip_prefix(&app.address).unwrap().to_owned();
    app.sign_in(&browser, ALICE, &path).await;
    let consent = browser.get(&url).send().await.unwrap().text().await.unwrap();
    let csrf = hidden_field(&consent, "csrf_token").unwrap();
    let denied = browser.post(&url).form(&[("csrf_token", csrf.as_str()), ("action", "deny")]).send().await.unwrap();
    assert_eq!(denied.status(), 200);

    let answer =
        raw_call(&server.mcp_url, &token, retry(&state, Some(json!({"authorize": {"action": "accept"}})))).await;

    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap().contains("declined"), "{answer}");
    server.stop().await;
    app.stop().await;
}

#[tokio::test]
async fn a_2026_07_28_client_that_opens_no_urls_gets_the_link_as_text() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let server = tool_server(&app, &[]).await;
    let token = user_token_for(&app, ALICE, &server.mcp_url).await;

    let answer = raw_call_declaring(&server.mcp_url, &token, json!({"name": TOOL, "arguments": {}}), json!({})).await;

    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(&app.url("/connect/")), "{text}");
    assert!(answer["result"].get("inputRequests").is_none(), "{answer}");
    server.stop().await;
    app.stop().await;
}

#[tokio::test]
async fn a_state_tampered_with_or_echoed_by_another_user_or_for_other_arguments_is_refused() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let server = tool_server(&app, &["--input-wait", "0s"]).await;
    let alice = user_token_for(&app, ALICE, &server.mcp_url).await;
    let bob = user_token_for(&app, BOB, &server.mcp_url).await;
    let (url, state) = input_required(&raw_call(&server.mcp_url, &alice, json!({"name": TOOL, "arguments": {}})).await);
    // Alice approves, so that any state that got through would now answer with her account.
    let browser = app.browser();
    app.approve_in_browser(&browser, &url, ALICE).await;

    let mut tampered = state.clone().into_bytes();
    let middle = tampered.len() / 2;
    tampered[middle] = if tampered[middle] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let other_arguments = json!({"name": TOOL, "arguments": {"account": "someone"}, "requestState": state});
    let attempts = [
        ("tampered", alice.as_str(), retry(&tampered, None)),
        ("made up", alice.as_str(), retry("rs1.e30.AAAA", None)),
        ("another user's", bob.as_str(), retry(&state, None)),
        ("for other arguments", alice.as_str(), other_arguments),
    ];
    let mut messages = Vec::new();
    for (what, token, params) in attempts {
        let answer = raw_call(&server.mcp_url, token, params).await;
        assert_eq!(answer["error"]["code"], -32602, "{what}: {answer}");
        assert!(answer.get("result").is_none(), "{what}: {answer}");
        messages.push(answer["error"]["message"].clone());
    }
    assert!(messages.windows(2).all(|w| w[0] == w[1]), "one neutral message: {messages:?}");
    assert!(!messages[0].to_string().contains("alice"), "{messages:?}");

    // Bob's own call is untouched (he has not connected demo), and alice's state still works.
    let bobs = raw_call(&server.mcp_url, &bob, json!({"name": TOOL, "arguments": {}})).await;
    assert_eq!(bobs["result"]["resultType"], "input_required", "{bobs}");
    let done = raw_call(&server.mcp_url, &alice, retry(&state, None)).await;
    assert_eq!(done["result"]["structuredContent"]["account"], "demo-user", "{done}");
    server.stop().await;
    app.stop().await;
}

#[tokio::test]
async fn a_2025_11_25_client_still_gets_minus_32042_and_the_completion() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let server = tool_server(&app, &[]).await;
    let token = user_token_for(&app, ALICE, &server.mcp_url).await;
    let client = mcp_client_at(&server.mcp_url, &token, ClientKind::Url).await.unwrap();
    let negotiated = client.peer().peer_info().unwrap().protocol_version.clone();
    assert_eq!(negotiated, ProtocolVersion::V_2025_11_25);

    let (id, url) = crate::helpers::token_api::url_elicitation_required(client.call(TOOL, json!({})).await);
    let browser = app.browser();
    app.approve_in_browser(&browser, &url, ALICE).await;

    assert_eq!(client.next_completion(Duration::from_secs(30)).await.as_deref(), Some(id.as_str()));
    let result = client.call(TOOL, json!({})).await.unwrap();
    assert!(serde_json::to_string(&result).unwrap().contains("demo-user"), "{result:?}");
    client.close().await;
    server.stop().await;
    app.stop().await;
}
