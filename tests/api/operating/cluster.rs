//! Several instances on one PostgreSQL database (issue 9): the test process runs instance A,
//! the real binary runs instance B in its own process, both on the same database with the same
//! key and public URL, as behind a load balancer. Signals travel through the database's outbox
//! and LISTEN/NOTIFY.

// `resources/subscribe` is deprecated for 2026-07-28 but is part of 2025-11-25.
#![allow(deprecated)]

use std::process::Command;
use std::time::Duration;

use oauth_broker::store::authorizations::AuthorizationStatus;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ResourceUpdatedNotificationParam, SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::json;
use tokio::sync::{Mutex, mpsc};

use crate::helpers::cluster::OtherInstance;
use crate::helpers::{ALICE, BOB, Backend, ClientKind, McpClient, TestApp, binary, eventually, location, spawn_app};

/// A client that records every `notifications/resources/updated` it receives.
struct UpdateRecorder {
    updates: mpsc::UnboundedSender<String>,
}

impl ClientHandler for UpdateRecorder {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        let _ = self.updates.send(params.uri);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("resource-watcher", "1.0.0"))
    }
}

/// A session subscribed to `broker://connections`.
struct Watcher {
    service: RunningService<RoleClient, UpdateRecorder>,
    updates: Mutex<mpsc::UnboundedReceiver<String>>,
}

impl Watcher {
    async fn start(mcp_url: &str, token: &str) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(mcp_url.to_owned()).auth_header(token.to_owned()),
        );
        let service = UpdateRecorder { updates: tx }.serve(transport).await.unwrap();
        service.peer().subscribe(SubscribeRequestParams::new("broker://connections")).await.unwrap();
        Self { service, updates: Mutex::new(rx) }
    }

    async fn heard_within(&self, wait: Duration) -> bool {
        tokio::time::timeout(wait, self.updates.lock().await.recv()).await.is_ok_and(|u| u.is_some())
    }

    async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// `provider_request` for `demo` on `client` answers -32042: the connect URL and elicitation id.
async fn needs_connecting(client: &McpClient) -> (String, String) {
    match client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await {
        Err(ServiceError::McpError(error)) if error.code.0 == -32042 => {
            let elicitation = &error.data.as_ref().unwrap()["elicitations"][0];
            (elicitation["url"].as_str().unwrap().to_owned(), elicitation["elicitationId"].as_str().unwrap().to_owned())
        }
        other => panic!("expected -32042, got {other:?}"),
    }
}

/// The browser leg up to the provider's redirect, on A: sign in, allow, approve at the demo
/// provider. Returns the callback URL (with code and state), not yet opened.
async fn approve_up_to_the_callback(first: &TestApp, browser: &reqwest::Client, connect_url: &str) -> String {
    let path = connect_url.strip_prefix(&first.address).expect("connect URL is ours");
    if browser.get(connect_url).send().await.unwrap().status() == 303 {
        assert_eq!(first.sign_in(browser, ALICE, path).await.status(), 303);
    }
    let html = browser.get(connect_url).send().await.unwrap().text().await.unwrap();
    let csrf = crate::helpers::hidden_field(&html, "csrf_token").expect("consent form");
    let approved =
        browser.post(connect_url).form(&[("csrf_token", csrf.as_str()), ("action", "approve")]).send().await.unwrap();
    assert_eq!(approved.status(), 303, "approve redirects to the provider");
    first.demo_provider_redirect(browser, &location(&approved), "demo-user", "approve").await
}

/// Opens the provider's redirect on instance B instead of A (the load balancer's choice).
async fn callback_on(instance: &OtherInstance, first: &TestApp, browser: &reqwest::Client, callback_url: &str) {
    let on_b = callback_url.replacen(&first.address, &instance.address, 1);
    assert_ne!(on_b, callback_url, "the callback goes to our public URL: {callback_url}");
    let answer = browser.get(&on_b).send().await.unwrap();
    assert_eq!(answer.status(), 303, "instance B handled the callback");
}

async fn two_instances() -> Option<(TestApp, OtherInstance)> {
    let first = spawn_app(Backend::Postgres).await?;
    let second = OtherInstance::start(&first, "").await;
    Some((first, second))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_handled_by_instance_b_notifies_only_the_session_on_instance_a_that_asked() {
    let Some((a, b)) = two_instances().await else { return };
    let alice = a.token_for(ALICE).await;
    // Arrange: Alice's session on A asks to connect; her other sessions (on A and on B) and
    // Bob's watch; her subscribers on both instances watch her connections.
    let starter = a.mcp_client(ALICE, ClientKind::Url).await;
    let same_user_on_a = a.mcp_client(ALICE, ClientKind::Url).await;
    let same_user_on_b = b.mcp_client(&a, ALICE, ClientKind::Url).await;
    let bob_on_a = a.mcp_client(BOB, ClientKind::Url).await;
    for client in [&same_user_on_a, &same_user_on_b, &bob_on_a] {
        client.call("list_connections", json!({})).await.unwrap();
    }
    let watcher_on_a = Watcher::start(&a.mcp_url(), &alice).await;
    let watcher_on_b = Watcher::start(&b.mcp_url(), &alice).await;
    let bob_watcher = Watcher::start(&a.mcp_url(), &a.token_for(BOB).await).await;
    let (url, id) = needs_connecting(&starter).await;

    // Act: the browser flow starts on A, and the provider's redirect lands on B.
    let browser = a.browser();
    let callback = approve_up_to_the_callback(&a, &browser, &url).await;
    callback_on(&b, &a, &browser, &callback).await;

    // Assert: the session that asked, on A, hears of it from B (well before the 5-second
    // re-read); no other session does; subscribers on both instances hear of the change.
    assert_eq!(starter.next_completion(Duration::from_secs(4)).await.as_deref(), Some(id.as_str()));
    assert!(watcher_on_a.heard_within(Duration::from_secs(4)).await, "A's subscriber hears of the connection");
    assert!(watcher_on_b.heard_within(Duration::from_secs(4)).await, "B's subscriber hears of the connection");
    assert_eq!(same_user_on_a.next_completion(Duration::from_millis(500)).await, None);
    assert_eq!(same_user_on_b.next_completion(Duration::from_millis(500)).await, None);
    assert_eq!(bob_on_a.next_completion(Duration::from_millis(200)).await, None);
    assert!(!bob_watcher.heard_within(Duration::from_millis(200)).await, "Bob's subscriber hears nothing");
    let row = a.state.core.store.authorizations().by_id(&id).await.unwrap().unwrap();
    assert_eq!(row.status, AuthorizationStatus::Completed);
    let retried =
        starter.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await.unwrap();
    assert_eq!(retried.structured_content.unwrap()["status"], 200);
    // What travelled holds ids only.
    let payloads: Vec<(String,)> =
        sqlx::query_as("SELECT payload FROM signal_outbox").fetch_all(a.state.core.store.pool()).await.unwrap();
    assert!(!payloads.is_empty(), "B wrote its signals to the outbox");
    for (payload,) in &payloads {
        assert!(!payload.contains("code") && !payload.contains("token") && !payload.contains("state\""), "{payload}");
    }

    for watcher in [watcher_on_a, watcher_on_b, bob_watcher] {
        watcher.close().await;
    }
    drop(b);
    a.stop().await;
}

/// Ends instance A's signal listener connection (as a database restart or an operator would).
async fn terminate_listener_of(app: &TestApp) -> u64 {
    let name = format!("{} {}", oauth_broker::events::LISTENER_APPLICATION_NAME, app.state.core.events.origin());
    let ended: Vec<(bool,)> = sqlx::query_as(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()",
    )
    .bind(&name)
    .fetch_all(app.state.core.store.pool())
    .await
    .unwrap();
    ended.len() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_connection_killed_and_reestablished_loses_no_completion() {
    let Some((a, b)) = two_instances().await else { return };
    let starter = a.mcp_client(ALICE, ClientKind::Url).await;
    let (url, id) = needs_connecting(&starter).await;
    let browser = a.browser();
    let callback = approve_up_to_the_callback(&a, &browser, &url).await;
    assert_eq!(terminate_listener_of(&a).await, 1, "A listens on one connection");

    // Act: while B handles the callback, A's listener connection is ended again and again,
    // so B's announcement finds nobody listening on A; then A may reconnect.
    let killer = tokio::spawn({
        let (pool, name) = (a.state.core.store.pool().clone(), a.state.core.events.origin().to_owned());
        async move {
            loop {
                let _ = sqlx::query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()",
                )
                .bind(format!("{} {name}", oauth_broker::events::LISTENER_APPLICATION_NAME))
                .execute(&pool)
                .await;
                // The pace of the fault under test (a connection ended again and again), not
                // a wait for an event.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    });
    callback_on(&b, &a, &browser, &callback).await;
    killer.abort();
    let _ = killer.await;

    // Assert: A's session still hears of the completion (caught up from the outbox).
    assert_eq!(starter.next_completion(Duration::from_secs(10)).await.as_deref(), Some(id.as_str()));
    // And the listener is back: a second completion, on the same session, arrives the fast way;
    // its being the session's next one proves the first was delivered once.
    starter.call("disconnect_account", json!({"provider": "demo"})).await.unwrap();
    let (url, second) = needs_connecting(&starter).await;
    let callback = approve_up_to_the_callback(&a, &browser, &url).await;
    callback_on(&b, &a, &browser, &callback).await;
    let next = starter.next_completion(Duration::from_secs(4)).await;
    assert_eq!(next.as_deref(), Some(second.as_str()), "the first was delivered once");
    drop(b);
    a.stop().await;
}

// ---- shared limits and the client's address ----

/// Signs in at `base` with `password`, from a browser of its own, optionally through a proxy
/// that says the client is `forwarded_for`. The status of the answer.
async fn sign_in_at(base: &str, username: &str, password: &str, forwarded_for: Option<&str>) -> u16 {
    let browser =
        reqwest::Client::builder().cookie_store(true).redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let with_header = |request: reqwest::RequestBuilder| match forwarded_for {
        Some(address) => request.header("X-Forwarded-For", address),
        None => request,
    };
    let page = with_header(browser.get(format!("{base}/login"))).send().await.unwrap();
    let csrf = crate::helpers::hidden_field(&page.text().await.unwrap(), "csrf_token").expect("a login form");
    let form = [("username", username), ("password", password), ("next", "/"), ("csrf_token", &csrf)];
    with_header(browser.post(format!("{base}/login")).form(&form)).send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sign_in_throttle_counts_attempts_made_on_both_instances() {
    let Some((a, b)) = two_instances().await else { return };
    // Act: five wrong passwords for Alice from one address, spread over both instances (each
    // alone saw fewer than the limit).
    for (i, base) in [&a.address, &b.address, &a.address, &b.address, &a.address].into_iter().enumerate() {
        assert_eq!(sign_in_at(base, ALICE, "wrong-password", None).await, 401, "attempt {i} is checked");
    }
    // Assert: the pair is locked on both, even for the right password.
    assert_eq!(sign_in_at(&b.address, ALICE, crate::helpers::PASSWORD, None).await, 429);
    assert_eq!(sign_in_at(&a.address, ALICE, crate::helpers::PASSWORD, None).await, 429);
    // Bob, from the same address, is not.
    assert_eq!(sign_in_at(&b.address, BOB, crate::helpers::PASSWORD, None).await, 303);
    drop(b);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_registration_budget_counts_registrations_made_on_both_instances() {
    let Some((a, b)) = two_instances().await else { return };
    let http = reqwest::Client::new();
    let register = |base: String| {
        let http = http.clone();
        async move {
            let metadata =
                json!({"redirect_uris": ["http://127.0.0.1:7777/callback"], "token_endpoint_auth_method": "none"});
            http.post(format!("{base}/register")).json(&metadata).send().await.unwrap()
        }
    };
    // Act: the address's whole budget, spread over both instances (each alone saw half of it).
    let limit = oauth_broker::authorization_server::registration::MAX_PER_WINDOW;
    for i in 0..limit {
        let base = if i % 2 == 0 { &a.address } else { &b.address };
        assert_eq!(register(base.clone()).await.status(), 201, "registration {i} fits the budget");
    }
    // Assert: the next one is refused on either instance, with a Retry-After.
    for base in [&a.address, &b.address] {
        let refused = register(base.clone()).await;
        assert_eq!(refused.status(), 429);
        let retry: i64 = refused.headers()["retry-after"].to_str().unwrap().parse().unwrap();
        assert!(retry > 0 && retry <= oauth_broker::authorization_server::registration::WINDOW_SECONDS);
    }
    drop(b);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_on_one_instance_finishes_its_call_in_flight_while_new_calls_go_to_the_other() {
    // Arrange: two instances on one database with a provider that holds its API answer; Alice
    // connected (through A's pages) and a tool call of hers waiting at the provider through B.
    let mut provider = crate::helpers::holding_provider::holding_provider().await;
    let toml = provider.toml();
    let options = crate::helpers::SpawnOptions { toml: toml.clone(), ..Default::default() };
    let Some(a) = crate::helpers::spawn_app_opts(Backend::Postgres, options, |builder| builder).await else { return };
    let mut b = OtherInstance::start(&a, &toml).await;
    let hold = json!({"provider": "slow", "method": "GET", "path": "/hold"});
    let on_b = std::sync::Arc::new(b.mcp_client(&a, ALICE, ClientKind::Url).await);
    let url = match on_b.call("provider_request", hold.clone()).await {
        Err(ServiceError::McpError(e)) => e.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned(),
        other => panic!("expected -32042, got {other:?}"),
    };
    crate::helpers::holding_provider::connect_in_browser(&a.url(""), &url, ALICE, crate::helpers::PASSWORD).await;
    let in_flight = tokio::spawn({
        let on_b = on_b.clone();
        async move { on_b.call("provider_request", hold).await }
    });
    tokio::time::timeout(Duration::from_secs(20), provider.arrived.recv())
        .await
        .expect("the call reached the provider");

    // Act: a rolling restart sends B SIGTERM.
    let pid = b.process.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());

    // Assert: B takes no new connection (a load balancer sends the next call elsewhere) …
    let port = b.address.rsplit(':').next().unwrap().parse::<u16>().unwrap();
    eventually("B refuses new connections", Duration::from_secs(10), || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err()
    })
    .await;
    // … a new session of Alice's on A is served, with the connection made before …
    let on_a = a.mcp_client(ALICE, ClientKind::Url).await;
    let listed = on_a.call("list_connections", json!({})).await.expect("A serves while B drains");
    assert!(format!("{listed:?}").contains("slow"), "the connection is there on A: {listed:?}");
    assert!(b.process.try_wait().unwrap().is_none(), "B waits for its call in flight");
    // … and the call in flight on B gets its answer before B exits 0.
    provider.release.notify_one();
    let answered = tokio::time::timeout(Duration::from_secs(20), in_flight).await.expect("in time").unwrap();
    let result = answered.expect("the call in flight on B was answered");
    assert_eq!(result.structured_content.unwrap()["body"]["held"], "released");
    let exit = eventually("B exits after its call", Duration::from_secs(25), || {
        let exited = b.process.try_wait().unwrap();
        async move { exited }
    })
    .await;
    assert!(exit.success(), "B's exit status {exit:?}");
    a.stop().await;
}

async fn app_with(toml: &str) -> TestApp {
    let options = crate::helpers::SpawnOptions { toml: toml.to_owned(), ..Default::default() };
    crate::helpers::spawn_app_opts(Backend::Sqlite, options, |builder| builder).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoofed_forwarded_for_from_a_peer_that_is_not_a_trusted_proxy_is_ignored() {
    // The test's own address (127.0.0.1) is not a listed proxy.
    let app = app_with("trusted_proxies = [\"10.0.0.0/8\"]").await;
    // Act: five wrong passwords, each claiming another client address.
    for i in 0..5 {
        let spoofed = format!("198.51.100.{i}");
        assert_eq!(sign_in_at(&app.address, ALICE, "wrong-password", Some(&spoofed)).await, 401);
    }
    // Assert: they were all counted for the real peer, which is now locked whatever it claims.
    assert_eq!(sign_in_at(&app.address, ALICE, crate::helpers::PASSWORD, Some("198.51.100.99")).await, 429);
    let audit = app.state.core.store.audit().entries(None, 20).await.unwrap();
    let failures: Vec<_> = audit.iter().filter(|e| e.action == "browser.sign_in_failed").collect();
    assert!(!failures.is_empty());
    for entry in failures {
        let detail = entry.detail.as_deref().unwrap_or_default();
        assert!(detail.contains("address=127.0.0.1"), "the peer's address is audited: {detail}");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_listed_proxy_each_client_address_has_its_own_budget() {
    let app = app_with("trusted_proxies = [\"127.0.0.1\"]").await;
    // A client's own first entry is ignored: the proxy appended the address it saw.
    for _ in 0..5 {
        assert_eq!(sign_in_at(&app.address, ALICE, "wrong-password", Some("192.0.2.1, 198.51.100.1")).await, 401);
    }
    assert_eq!(sign_in_at(&app.address, ALICE, crate::helpers::PASSWORD, Some("198.51.100.1")).await, 429);
    assert_eq!(sign_in_at(&app.address, ALICE, crate::helpers::PASSWORD, Some("198.51.100.2")).await, 303);
    let audit = app.state.core.store.audit().entries(None, 20).await.unwrap();
    assert!(
        audit.iter().any(|e| e.detail.as_deref().is_some_and(|d| d.contains("address=198.51.100.1"))),
        "the client's address is audited"
    );
    app.stop().await;
}

// ---- sessions across instances ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_killed_mid_flow_the_user_finishes_on_the_other_and_the_client_reinitializes_there() {
    let Some((a, mut b)) = two_instances().await else { return };
    let alice = a.token_for(ALICE).await;
    // Arrange: Alice's client is on B (sticky routing sent it there) and needs to connect.
    let on_b = b.mcp_client(&a, ALICE, ClientKind::Url).await;
    let raw_on_b = crate::helpers::streams::RawSession::open(&b.mcp_url(), &alice).await;
    let (url, id) = needs_connecting(&on_b).await;
    let browser = a.browser();
    let callback = approve_up_to_the_callback(&a, &browser, &url).await;

    // Act: B is killed (SIGKILL, nothing of it runs again); the provider's redirect and the
    // rest of the browser flow land on A.
    b.kill();
    let landed = a.land(&browser, &callback).await;
    assert_eq!(landed.status(), 200, "the user finishes the flow on A");

    // Assert: the client's session died with B; A does not know it and says 404, which tells a
    // client to initialize again (MCP 2025-11-25, transports: session management).
    assert!(needs_connecting_or_error(&on_b).await, "B is gone");
    let unknown = a
        .http()
        .post(a.mcp_url())
        .bearer_auth(&alice)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &raw_on_b.id)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404, "an instance that does not know a session answers 404");
    // The client initializes on A, and its retry succeeds with the grant the flow stored.
    let on_a = a.mcp_client(ALICE, ClientKind::Url).await;
    let retried =
        on_a.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await.unwrap();
    assert_eq!(retried.structured_content.unwrap()["status"], 200);
    // Nothing lost in the database: the authorization is completed, one active grant.
    let row = a.state.core.store.authorizations().by_id(&id).await.unwrap().unwrap();
    assert_eq!(row.status, AuthorizationStatus::Completed);
    let (grants,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM grants WHERE user_id = $1 AND provider = 'demo' AND status = 'active'")
            .bind(a.user_id(ALICE).await)
            .fetch_one(a.state.core.store.pool())
            .await
            .unwrap();
    assert_eq!(grants, 1);
    a.stop().await;
}

/// True when a call on `client` fails (its server is gone).
async fn needs_connecting_or_error(client: &McpClient) -> bool {
    let call = client.call("list_connections", json!({}));
    matches!(tokio::time::timeout(Duration::from_secs(20), call).await, Ok(Err(_)) | Err(_))
}

/// One stateless (MCP 2026-07-28) `tools/call` at `mcp_url`: no session, the client's
/// version and capabilities in `_meta`. The JSON-RPC answer.
async fn stateless_call(mcp_url: &str, token: &str, tool: &str, arguments: serde_json::Value) -> serde_json::Value {
    stateless_retry(mcp_url, token, tool, arguments, None).await
}

/// [`stateless_call`], as a retry carrying `inputResponses` and `requestState` when given.
async fn stateless_retry(
    mcp_url: &str,
    token: &str,
    tool: &str,
    arguments: serde_json::Value,
    retry: Option<(serde_json::Value, &str)>,
) -> serde_json::Value {
    let mut body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "stateless-client", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}}},
        },
    }});
    if let Some((responses, state)) = retry {
        body["params"]["inputResponses"] = responses;
        body["params"]["requestState"] = json!(state);
    }
    let response = reqwest::Client::new()
        .post(mcp_url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        // SEP-2243: the method and tool name in headers, for load balancers that route on them.
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let created_session = response.headers().get("mcp-session-id").is_some();
    let text = response.text().await.unwrap();
    assert_eq!(status, 200, "served without a session: {text}");
    assert!(!created_session, "no session was created");
    // JSON, or SSE whose data lines hold the answer.
    std::iter::once(text.as_str())
        .chain(text.lines().filter_map(|line| line.strip_prefix("data:")))
        .filter_map(|data| serde_json::from_str::<serde_json::Value>(data.trim()).ok())
        .find(|message| message.get("id").is_some())
        .unwrap_or_else(|| panic!("an answer in {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_clients_alternating_between_instances_need_no_affinity() {
    let Some((a, b)) = two_instances().await else { return };
    let alice = a.token_for(ALICE).await;
    let request = json!({"provider": "demo", "method": "GET", "path": "/me"});
    // On A: not connected yet, the answer is the link and a state to retry with.
    let first = stateless_call(&a.mcp_url(), &alice, "provider_request", request.clone()).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let url = first["result"]["inputRequests"]["authorize"]["params"]["url"].as_str().unwrap().to_owned();
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    // The retry waits on A while the user finishes: the browser flow, its callback handled by B.
    let retry = tokio::spawn({
        let (mcp_url, alice, request) = (a.mcp_url(), alice.clone(), request.clone());
        async move {
            let accepted = json!({"authorize": {"action": "accept"}});
            stateless_retry(&mcp_url, &alice, "provider_request", request, Some((accepted, &state))).await
        }
    });
    let browser = a.browser();
    let callback = approve_up_to_the_callback(&a, &browser, &url).await;
    callback_on(&b, &a, &browser, &callback).await;
    let answered = retry.await.unwrap();
    assert_eq!(answered["result"]["structuredContent"]["status"], 200, "the retry waiting on A: {answered}");
    // Then B, A, B: each request served by whichever instance gets it.
    for (i, mcp_url) in [b.mcp_url(), a.mcp_url(), b.mcp_url()].iter().enumerate() {
        let answer = stateless_call(mcp_url, &alice, "provider_request", request.clone()).await;
        assert_eq!(answer["result"]["structuredContent"]["status"], 200, "request {i}: {answer}");
    }
    let listed = stateless_call(&a.mcp_url(), &alice, "list_connections", json!({})).await;
    assert_eq!(listed["result"]["structuredContent"]["connections"][0]["status"], "connected", "{listed}");
    drop(b);
    a.stop().await;
}

// ---- benchmark ----

/// Milliseconds from opening the provider's redirect (on `callback_base`) to the asking
/// session on A receiving `notifications/elicitation/complete`, for `rounds` flows.
async fn completion_latencies(a: &TestApp, callback_base: &str, rounds: usize) -> Vec<f64> {
    let client = a.mcp_client(ALICE, ClientKind::Url).await;
    let browser = a.browser();
    let mut latencies = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let (url, id) = needs_connecting(&client).await;
        let callback = approve_up_to_the_callback(a, &browser, &url).await;
        let target = callback.replacen(&a.address, callback_base, 1);
        let started = std::time::Instant::now();
        assert_eq!(browser.get(&target).send().await.unwrap().status(), 303);
        let heard = client.next_completion(Duration::from_secs(10)).await;
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(heard.as_deref(), Some(id.as_str()));
        client.call("disconnect_account", json!({"provider": "demo"})).await.unwrap();
    }
    client.close().await;
    latencies
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Benchmark (issue 9), not a check: callback → completion latency when the callback lands on
/// another instance (through PostgreSQL's outbox and NOTIFY) against the same instance (in
/// process), p50/p99 and their ratio. Run:
/// `REQUIRE_POSTGRES=1 cargo test --release --test api operating::cluster::bench -- --ignored --nocapture`
/// (`BENCH_ROUNDS`, default 50).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run on purpose"]
async fn bench_callback_to_completion_across_instances_against_within_one() {
    let rounds = std::env::var("BENCH_ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(50);
    let Some((a, b)) = two_instances().await else { return };
    // Warm-up (connections, first-use costs), then the baseline and the cross-instance run.
    completion_latencies(&a, &a.address, 3).await;
    completion_latencies(&a, &b.address, 3).await;
    let mut within = completion_latencies(&a, &a.address, rounds).await;
    let mut across = completion_latencies(&a, &b.address, rounds).await;
    within.sort_by(f64::total_cmp);
    across.sort_by(f64::total_cmp);
    let (w50, w99, x50, x99) =
        (percentile(&within, 0.5), percentile(&within, 0.99), percentile(&across, 0.5), percentile(&across, 0.99));
    println!("callback -> elicitation/complete, {rounds} flows each (ms, includes the callback's code exchange)");
    println!("  within one instance:   p50 {w50:.1}  p99 {w99:.1}");
    println!("  across two instances:  p50 {x50:.1}  p99 {x99:.1}");
    println!("  ratio across/within:   p50 {:.2}  p99 {:.2}", x50 / w50, x99 / w99);
    drop(b);
    a.stop().await;
}

/// A (in this process) and B (the binary) on one PostgreSQL database, both with `toml`.
async fn two_instances_with(toml: &str) -> Option<(TestApp, OtherInstance)> {
    let first = crate::helpers::token_api::app_with(Backend::Postgres, toml).await?;
    let second = OtherInstance::start(&first, toml).await;
    Some((first, second))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_services_request_budget_is_used_up_across_both_instances() {
    use crate::helpers::token_api::{notes_service, poll};
    let Some((a, b)) = two_instances_with("[token_api]\nrequests_per_minute = 6\n").await else { return };
    let notes = notes_service(&a, "notes").await;
    let other = notes_service(&a, "other").await;
    let unknown = "0123456789abcdef0123456789abcdef";
    // Act: six requests spread over both instances (each alone saw three).
    for (i, base) in [&a.address, &b.address, &a.address, &b.address, &a.address, &b.address].into_iter().enumerate() {
        assert_eq!(poll(base, &notes, unknown, 0).await.status, 404, "request {i} is served");
    }
    // Assert: the seventh is refused on either instance; another service is not.
    // The next request fits one request's share of the minute (10 s) after the account's
    // minute: on B's clock (the wall's) within 10 s; on A's, which stands at A's start, up to
    // as much later as B's clock is ahead of it.
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let behind = wall.saturating_sub(a.now() as u64);
    for (name, base, most) in [("A", &a.address, 11 + behind), ("B", &b.address, 10)] {
        let refused = poll(base, &notes, unknown, 0).await;
        assert_eq!((refused.status.as_u16(), refused.body["limit"].as_str()), (429, Some("requests")), "{name}");
        assert_eq!(refused.retry_after.map(serde_json::Value::from), Some(refused.body["retry_after"].clone()));
        assert!(refused.retry_after.is_some_and(|s| (1..=most).contains(&s)), "{name}: {:?}", refused.retry_after);
    }
    assert_eq!(poll(&b.address, &other, unknown, 0).await.status, 404);
    drop(b);
    a.stop().await;
}

/// A busy service on both instances at once: each instance leases shares of the budget (two
/// requests each at 1,200 a minute, the next leased ahead when one is used), so the total
/// served may differ from the budget by at most what one instance holds unused (a share and
/// a half) per instance, plus what the budget refilled on B's moving clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_services_budget_holds_across_both_instances_within_a_share_and_a_half_each() {
    use crate::helpers::token_api::{notes_service, poll_with};
    use oauth_broker::store::token_api::most_unused;
    use std::sync::atomic::{AtomicU64, Ordering};
    let per_minute = 1_200;
    let toml = format!("[token_api]\nrequests_per_minute = {per_minute}\n");
    let Some((a, b)) = two_instances_with(&toml).await else { return };
    let notes = notes_service(&a, "notes").await;
    let unknown = "0123456789abcdef0123456789abcdef";
    let (served, refused) = (std::sync::Arc::new(AtomicU64::new(0)), std::sync::Arc::new(AtomicU64::new(0)));
    // Act: eight workers, four on each instance, each until it is refused.
    let workers: Vec<_> = (0..8)
        .map(|i| {
            let base = if i % 2 == 0 { a.address.clone() } else { b.address.clone() };
            let (notes, served, refused) = (notes.clone(), served.clone(), refused.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                loop {
                    let answer = poll_with(&client, &base, &notes, unknown, 0).await;
                    match answer.status.as_u16() {
                        404 => served.fetch_add(1, Ordering::SeqCst),
                        429 => {
                            assert!(answer.retry_after.is_some_and(|s| s >= 1), "a refusal says when to retry");
                            refused.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                        other => panic!("unexpected {other}: {}", answer.body),
                    };
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    // Assert: the budget, within what each instance may hold unused and B's refill (its clock
    // moves in whole seconds: one more second's worth).
    let served = served.load(Ordering::SeqCst);
    let unused = u64::from(most_unused(per_minute));
    // B's clock (the wall's) has run on from A's (stopped at A's start) by the end.
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let refill = ((wall - a.now()).max(0) as u64 + 2) * u64::from(per_minute) / 60;
    let budget = u64::from(per_minute);
    assert!(served + 2 * unused >= budget, "served {served}: no more than {unused} per instance unused");
    assert!(served <= budget + 2 * unused + refill, "served {served}, refill at most {refill}");
    assert_eq!(refused.load(Ordering::SeqCst), 8);
    drop(b);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_slot_held_by_a_killed_instance_is_freed_after_its_lease() {
    use crate::helpers::token_api::{assert_rate_limited, notes_service, pending_authorization, poll, slots_become};
    let Some((a, mut b)) = two_instances_with("[token_api]\nopen_waits = 1\n").await else { return };
    let notes = notes_service(&a, "notes").await;
    let id = pending_authorization(&a, &notes).await;
    // Arrange: a long poll on B holds the service's only slot.
    let b_address = b.address.clone();
    let (service_id, secret) = (notes.client_id.clone(), notes.secret.clone());
    let long_poll = tokio::spawn(async move {
        reqwest::Client::new()
            .get(format!("{b_address}/v1/authorizations/{id}?wait=60"))
            .basic_auth(service_id, Some(secret))
            .send()
            .await
    });
    slots_become(&a, &notes, 1).await;
    let id = pending_authorization(&a, &notes).await;
    assert_rate_limited(&poll(&a.address, &notes, &id, 1).await, "open_waits", 2);

    // Act: B dies without releasing it.
    b.kill();
    assert!(long_poll.await.unwrap().is_err(), "B's long poll ended with B");
    // Assert: the slot still counts until its lease ends (nobody renews it), then it is free.
    assert_rate_limited(&poll(&a.address, &notes, &id, 1).await, "open_waits", 2);
    let lease = a.state.core.config.token_api.wait_lease.as_secs() as i64;
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    // B stamped its lease from the wall clock; A's clock is the test's.
    a.clock.advance(wall - a.now() + lease + 1);
    assert_eq!(poll(&a.address, &notes, &id, 1).await.body["status"], "pending");
    a.stop().await;
}

// ---- the listener's catch-up, and the admin CLI's signals ----

/// How many listener connections A has open on the database.
async fn listeners_of(app: &TestApp) -> i64 {
    let name = format!("{} {}", oauth_broker::events::LISTENER_APPLICATION_NAME, app.state.core.events.origin());
    let (count,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()",
    )
    .bind(&name)
    .fetch_one(app.state.core.store.pool())
    .await
    .unwrap();
    count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_sent_while_the_listener_is_away_arrives_through_the_outbox_catch_up() {
    use crate::helpers::db_proxy::{DbProxy, Mode, postgres_upstream};
    // Arrange: A's listener (only) connects through a proxy the test can cut; its pool does not.
    let proxy = DbProxy::start(postgres_upstream()).await;
    let port = proxy.addr.port();
    let options = crate::helpers::SpawnOptions {
        signal_listener_url: Some(Box::new(move |url: &str| {
            let mut target = url::Url::parse(url).unwrap();
            target.set_host(Some("127.0.0.1")).unwrap();
            target.set_port(Some(port)).unwrap();
            target.to_string()
        })),
        ..Default::default()
    };
    let Some(a) = crate::helpers::spawn_app_opts(Backend::Postgres, options, |builder| builder).await else { return };
    let b = OtherInstance::start(&a, "").await;
    let starter = a.mcp_client(ALICE, ClientKind::Url).await;
    let (url, id) = needs_connecting(&starter).await;
    let browser = a.browser();
    let callback = approve_up_to_the_callback(&a, &browser, &url).await;
    assert_eq!(listeners_of(&a).await, 1, "A listens through the proxy");

    // Act: A's listener is cut off (and cannot reconnect) while B completes the authorization,
    // so B's announcement finds nobody listening on A.
    proxy.set(Mode::Cut);
    eventually("A's listener connection ends", Duration::from_secs(20), || async { listeners_of(&a).await == 0 }).await;
    callback_on(&b, &a, &browser, &callback).await;
    eventually("B's signal is in the outbox", Duration::from_secs(20), || {
        let (store, id) = (a.state.core.store.clone(), id.clone());
        async move { store.signals().after(0, 1000).await.unwrap().iter().any(|row| row.payload.contains(&id)) }
    })
    .await;
    // Nothing has reached A so far (looked at, not waited for: that the completion did not come
    // by the announcement is proved below, by the catch-up counter).
    assert_eq!(starter.next_completion(Duration::ZERO).await, None, "nothing reaches A while away");
    let caught_up_before = a.state.core.events.signals_caught_up();
    proxy.set(Mode::Forward);

    // Assert: once A reconnects, the completion arrives, read from the outbox.
    assert_eq!(starter.next_completion(Duration::from_secs(20)).await.as_deref(), Some(id.as_str()));
    assert!(a.state.core.events.signals_caught_up() > caught_up_before, "delivered by the catch-up read");
    // Delivered once: a second completion on the same session is the session's next one.
    starter.call("disconnect_account", json!({"provider": "demo"})).await.unwrap();
    let (url, second) = needs_connecting(&starter).await;
    let callback = approve_up_to_the_callback(&a, &browser, &url).await;
    callback_on(&b, &a, &browser, &callback).await;
    let next = starter.next_completion(Duration::from_secs(20)).await;
    assert_eq!(next.as_deref(), Some(second.as_str()), "delivered once");
    drop(b);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_the_admin_cli_revokes_on_postgresql_reaches_a_subscribed_session_on_the_server() {
    let Some(a) = spawn_app(Backend::Postgres).await else { return };
    a.connected_client(ALICE).await.close().await;
    let watcher = Watcher::start(&a.mcp_url(), &a.token_for(ALICE).await).await;
    let instance = a.instance();
    let data_dir = tempfile::tempdir().unwrap();

    // Act: the CLI, another process, disconnects Alice's grant and exits at once.
    let output = tokio::process::Command::new(binary())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("OAUTH_BROKER_ENCRYPTION_KEY", secrecy::ExposeSecret::expose_secret(&instance.encryption_key))
        .env("OAUTH_BROKER_LOG", "warn")
        .args(["--demo", "--public-url", &instance.public_url, "--database-url", &instance.database_url])
        .arg("--data-dir")
        .arg(data_dir.path())
        .args(["admin", "grants", "revoke", ALICE, "demo"])
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    // Assert: the server's subscribed session hears of it (the CLI's signal was written before
    // it exited).
    assert!(watcher.heard_within(Duration::from_secs(10)).await, "resources/updated after the CLI's revoke");
    watcher.close().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_completion_budget_counts_completions_made_on_both_instances() {
    use oauth_broker::mcp::completion::PER_WINDOW;
    let Some((a, b)) = two_instances().await else { return };
    let on_a = a.mcp_client(ALICE, ClientKind::Url).await;
    let on_b = b.mcp_client(&a, ALICE, ClientKind::Url).await;
    // B stamps completions with the wall clock: A's clock is set to it, so both count the same
    // window.
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    a.clock.advance(wall - a.now());
    let complete = |client: &McpClient| {
        let peer = client.peer().clone();
        async move { peer.complete_prompt_argument("connect_provider", "provider", "d", None).await }
    };
    // Act: the budget's completions, alternating between the instances (each alone saw half).
    for i in 0..PER_WINDOW {
        let client = if i % 2 == 0 { &on_a } else { &on_b };
        assert!(complete(client).await.is_ok(), "completion {i} is answered");
    }
    // Assert: the next is refused on either instance.
    assert!(complete(&on_b).await.unwrap_err().to_string().contains("slow down"));
    assert!(complete(&on_a).await.unwrap_err().to_string().contains("slow down"));
    on_a.close().await;
    on_b.close().await;
    drop(b);
    a.stop().await;
}
