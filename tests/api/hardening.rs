//! What the attack run of issue 13 found, each reproduced: guessing one account from many
//! addresses, failed sign-ins missing from the audit log, tool arguments outside their schema,
//! a CSP that let forms post anywhere, and keep-alive connections dropped after early refusals.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceError;
use rmcp::model::{CallToolResult, ErrorData};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use oauth_broker::web::throttle::ACCOUNT_BUDGET;

use crate::helpers::{ALICE, BOB, ClientKind, McpClient, PASSWORD, TestApp, hidden_field, location, urlencode};
use crate::on_both_backends;

/// A browser whose connections come from `ip` (any 127.0.0.0/8 address reaches the server on
/// Linux), keeping its cookies in `jar` (so one browser can change networks).
fn browser_at(ip: &str, jar: Arc<reqwest::cookie::Jar>) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(ip.parse::<IpAddr>().unwrap())
        .cookie_provider(jar)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// Fills in and posts the sign-in form.
async fn try_sign_in(app: &TestApp, browser: &reqwest::Client, username: &str, password: &str) -> reqwest::Response {
    let page = browser.get(app.url("/login?next=/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csrf = hidden_field(&page.text().await.unwrap(), "csrf_token").unwrap();
    browser
        .post(app.url("/login"))
        .form(&[("username", username), ("password", password), ("next", "/"), ("csrf_token", &csrf)])
        .send()
        .await
        .unwrap()
}

async fn failed_sign_ins(app: &TestApp) -> Vec<oauth_broker::store::audit::AuditEntry> {
    let entries = app.state.core.store.audit().entries(None, 1000).await.unwrap();
    entries.into_iter().filter(|e| e.action == "browser.sign_in_failed").collect()
}

async fn many_addresses_guessing_one_account_are_throttled_while_the_owner_still_signs_in(app: &TestApp) {
    // Arrange: the owner signed in once, from home, in this browser.
    let owners_jar = Arc::new(reqwest::cookie::Jar::default());
    let home = browser_at("127.0.0.200", owners_jar.clone());
    assert_eq!(try_sign_in(app, &home, ALICE, PASSWORD).await.status(), 303);

    // Act: 30 addresses × 4 wrong passwords, each address under its own limit.
    let mut refused = 0;
    let mut checked = 0;
    for i in 2..32 {
        let attacker = browser_at(&format!("127.0.0.{i}"), Arc::default());
        for guess in 0..4 {
            match try_sign_in(app, &attacker, ALICE, &format!("guess-{i}-{guess}")).await.status().as_u16() {
                401 => checked += 1,
                429 => refused += 1,
                other => panic!("unexpected {other}"),
            }
        }
    }

    // Assert: only the account budget reached the password check.
    assert_eq!(checked, ACCOUNT_BUDGET, "120 guesses, {checked} checked");
    assert_eq!(refused, 120 - ACCOUNT_BUDGET);
    // A new browser at a new address waits too, even with the right password, and is told how long.
    let stranger = try_sign_in(app, &browser_at("127.0.0.99", Arc::default()), ALICE, PASSWORD).await;
    assert_eq!(stranger.status(), 429);
    assert!(stranger.headers()["retry-after"].to_str().unwrap().parse::<i64>().unwrap() > 0);
    // The owner's browser, now on another network, is recognised by its device cookie.
    let travelling = browser_at("127.0.0.201", owners_jar);
    let signed_in = try_sign_in(app, &travelling, ALICE, PASSWORD).await;
    assert_eq!(signed_in.status(), 303, "the owner's browser gets through");
    // The owner's home address, cookies cleared, is recognised too.
    assert_eq!(try_sign_in(app, &browser_at("127.0.0.200", Arc::default()), ALICE, PASSWORD).await.status(), 303);
    // Other accounts are untouched.
    assert_eq!(try_sign_in(app, &browser_at("127.0.0.98", Arc::default()), BOB, PASSWORD).await.status(), 303);
    // Every refusal is in the audit log.
    assert_eq!(failed_sign_ins(app).await.len(), 121);
}
on_both_backends!(account_budget, many_addresses_guessing_one_account_are_throttled_while_the_owner_still_signs_in);

async fn failed_sign_ins_are_audited_with_username_address_and_reason_but_never_the_password(app: &TestApp) {
    let browser = app.browser();
    // Unknown user (with a bidi override and far too long), wrong password, then throttled.
    let spoof = format!("mallory\u{202e}nimda{}", "x".repeat(200));
    assert_eq!(try_sign_in(app, &browser, &spoof, "secret-guess-0").await.status(), 401);
    for i in 1..=5 {
        assert_eq!(try_sign_in(app, &browser, ALICE, &format!("secret-guess-{i}")).await.status(), 401);
    }
    assert_eq!(try_sign_in(app, &browser, ALICE, "secret-guess-6").await.status(), 429);

    let mut entries = failed_sign_ins(app).await;
    entries.reverse();
    assert_eq!(entries.len(), 7, "{entries:?}");
    let alice = app.user_id(ALICE).await;
    let detail = |i: usize| entries[i].detail.clone().unwrap();

    assert_eq!(entries[0].user_id, None);
    assert!(detail(0).starts_with("username=\"mallory\\u{202e}nimda"), "{}", detail(0));
    assert!(detail(0).ends_with("…\" address=127.0.0.1 reason=unknown_user"), "{}", detail(0));
    assert!(!detail(0).contains('\u{202e}'), "the override is escaped");
    assert!(detail(0).len() < 150, "the username is bounded: {}", detail(0));
    for entry in &entries[1..6] {
        assert_eq!(entry.user_id.as_deref(), Some(alice.as_str()), "attempts on an account are in its trail");
        assert_eq!(entry.detail.as_deref(), Some("username=\"alice\" address=127.0.0.1 reason=wrong_password"));
    }
    assert_eq!(detail(6), "username=\"alice\" address=127.0.0.1 reason=throttled:account_address");
    assert_eq!(entries[6].user_id.as_deref(), Some(alice.as_str()));
    let everything = serde_json::to_string(&app.state.core.store.audit().entries(None, 1000).await.unwrap()).unwrap();
    assert!(!everything.contains("secret-guess"), "no password in the audit log");
}
on_both_backends!(
    failed_sign_in_audit,
    failed_sign_ins_are_audited_with_username_address_and_reason_but_never_the_password
);

/// An extension tool with a schema of its own.
struct Counter;

impl oauth_broker::mcp::extension::Extension for Counter {
    fn tools(&self) -> Vec<rmcp::model::Tool> {
        let schema = json!({"type": "object", "properties": {"count": {"type": "integer", "maximum": 5}},
                            "required": ["count"], "additionalProperties": false});
        vec![rmcp::model::Tool::new("count_to", "Counts.", Arc::new(schema.as_object().cloned().unwrap()))]
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Option<rmcp::model::JsonObject>,
        _ctx: oauth_broker::mcp::extension::ExtensionContext,
    ) -> oauth_broker::mcp::extension::ExtensionFuture<'a, rmcp::model::CallToolResponse> {
        Box::pin(async move {
            (name == "count_to").then(|| {
                let count = arguments.unwrap_or_default()["count"].as_i64().unwrap_or(-1);
                Ok(CallToolResult::success(vec![rmcp::model::ContentBlock::text(format!("counted to {count}"))]).into())
            })
        })
    }
}

async fn refusal(client: &McpClient, tool: &str, arguments: Value) -> ErrorData {
    match client.call(tool, arguments.clone()).await {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("{tool} {arguments}: expected an error, got {other:?}"),
    }
}

async fn tool_arguments_are_checked_against_the_advertised_schema(backend: crate::helpers::Backend) {
    let Some(app) = crate::helpers::spawn_app_with(backend, |builder| builder.extension(Counter)).await else {
        return;
    };
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let cases = [
        (
            "connect_account",
            json!({"provider": "demo", "account": "a".repeat(1000)}),
            "account: longer than 128 characters",
        ),
        ("connect_account", json!({"provider": "demo", "scopes": "profile"}), "scopes: must be of type array"),
        ("connect_account", json!({"account": "work"}), "provider: required"),
        ("disconnect_account", json!({"provider": "nope"}), "provider: must be one of: demo"),
        (
            "provider_request",
            json!({"provider": "demo", "method": "TRACE", "path": "/me"}),
            "method: must be one of: GET, POST, PUT, PATCH, DELETE, HEAD",
        ),
        (
            "provider_request",
            json!({"provider": "demo", "method": "GET", "path": "/me", "token": "x"}),
            "token: not an argument of this tool",
        ),
        ("count_to", json!({"count": "three"}), "count: must be of type integer"),
        ("count_to", json!({"count": 6}), "count: greater than 5"),
        ("count_to", json!({}), "count: required"),
    ];
    for (tool, arguments, message) in cases {
        let error = refusal(&client, tool, arguments.clone()).await;
        assert_eq!(error.code.0, -32602, "{tool} {arguments}");
        assert_eq!(error.message, message, "{tool} {arguments}");
    }
    assert!(
        app.state.core.store.authorizations().for_user(&app.user_id(ALICE).await, 10).await.unwrap().is_empty(),
        "nothing ran"
    );

    // Valid calls still work.
    let listed = client.call("list_connections", json!({})).await.unwrap();
    assert_ne!(listed.is_error, Some(true));
    let counted = client.call("count_to", json!({"count": 3})).await.unwrap();
    assert_eq!(counted.content[0].as_text().unwrap().text, "counted to 3");
    let asked = refusal(&client, "provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    assert_eq!(asked.code.0, -32042, "a valid call reaches the tool: {asked:?}");
    client.close().await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_schemas_are_enforced_on_sqlite() {
    tool_arguments_are_checked_against_the_advertised_schema(crate::helpers::Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_schemas_are_enforced_on_postgres() {
    tool_arguments_are_checked_against_the_advertised_schema(crate::helpers::Backend::Postgres).await;
}

/// The sources of the page's CSP `form-action`.
fn form_action(response: &reqwest::Response) -> Vec<String> {
    let csp = response.headers()["content-security-policy"].to_str().unwrap();
    let directive = csp.split(';').map(str::trim).find(|d| d.starts_with("form-action ")).expect("form-action");
    directive.split_whitespace().skip(1).map(str::to_owned).collect()
}

async fn forms_may_post_only_to_the_broker_and_the_redirect_their_page_needs(app: &TestApp) {
    let own = app.address.clone();
    // Ordinary pages: the broker only.
    let browser = app.browser();
    for path in ["/", "/login", "/connections", "/no-such-page"] {
        let response = browser.get(app.url(path)).send().await.unwrap();
        assert_eq!(form_action(&response), ["'self'"], "{path}");
    }

    // The provider consent page: plus the provider's authorization origin (the demo provider
    // lives at the broker's own origin).
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let link = refusal(&client, "provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    let url = link.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();
    app.sign_in(&browser, ALICE, url.strip_prefix(&own).unwrap()).await;
    let consent = browser.get(&url).send().await.unwrap();
    assert_eq!(consent.status(), 200);
    assert_eq!(form_action(&consent), ["'self'", own.as_str()]);

    // The authorization server's consent page: plus that client's redirect origin, no other.
    let registered = app
        .http()
        .post(app.url("/register"))
        .json(&json!({"client_name": "CSP Tool", "redirect_uris": ["https://tool.example/oauth/cb"],
                      "token_endpoint_auth_method": "none"}))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), 201);
    let client_id = registered.json::<Value>().await.unwrap()["client_id"].as_str().unwrap().to_owned();
    let query = format!(
        "/authorize?response_type=code&client_id={}&redirect_uri={}&code_challenge={}&code_challenge_method=S256&resource={}",
        urlencode(&client_id),
        urlencode("https://tool.example/oauth/cb"),
        "a".repeat(43),
        urlencode(&app.mcp_url()),
    );
    let page = browser.get(app.url(&query)).send().await.unwrap();
    assert_eq!(page.status(), 200, "{}", location(&page));
    assert_eq!(form_action(&page), ["'self'", "https://tool.example"]);
    client.close().await;
}
on_both_backends!(csp_form_action, forms_may_post_only_to_the_broker_and_the_redirect_their_page_needs);

/// Writes `first` (with a body too big to arrive in one read) and then `second` on one
/// connection, and returns everything the server sent until it closed.
async fn two_requests_on_one_connection(app: &TestApp, first: &str, second: &str) -> String {
    let address = app.address.strip_prefix("http://").unwrap();
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let body = "x".repeat(256 * 1024);
    let first = format!("{first}Content-Length: {}\r\n\r\n{body}", body.len());
    let second = second.to_owned();
    // Written concurrently with reading: the server may answer before the body is all sent.
    let writing = tokio::spawn(async move {
        writer.write_all(first.as_bytes()).await?;
        writer.write_all(second.as_bytes()).await?;
        writer.flush().await?;
        Ok::<_, std::io::Error>(writer)
    });
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), reader.read_to_end(&mut received)).await;
    assert!(read.is_ok(), "the server closes after the second request (Connection: close)");
    let _ = writing.await;
    String::from_utf8_lossy(&received).into_owned()
}

async fn early_refusals_keep_the_connection_usable(app: &TestApp) {
    let host = app.address.strip_prefix("http://").unwrap();
    let second = format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    for (first, status) in [
        // 401: no bearer token, body never read.
        (format!("POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"), "401"),
        // 404: no such route.
        (format!("POST /no-such-path HTTP/1.1\r\nHost: {host}\r\n"), "404"),
    ] {
        let received = two_requests_on_one_connection(app, &first, &second).await;
        assert!(received.starts_with(&format!("HTTP/1.1 {status}")), "{received}");
        let answers = received.matches("HTTP/1.1 ").count();
        assert_eq!(answers, 2, "the second request on the connection is answered: {received}");
        assert!(received.ends_with("ok"), "{received}");
    }
}
on_both_backends!(keep_alive, early_refusals_keep_the_connection_usable);
