//! No secret in a log line: the real binary, with debug logging on, goes through the whole
//! flow; afterwards its output is searched for every secret that passed through it.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::helpers::{hidden_field, hidden_fields, location};

fn broker(data_dir: &std::path::Path, public_url: &str) -> Command {
    let mut command = Command::new(crate::helpers::binary());
    command.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
    command.env("OAUTH_BROKER_DATA_DIR", data_dir).env("OAUTH_BROKER_PUBLIC_URL", public_url);
    command.env("OAUTH_BROKER_LOG", "debug");
    command
}

fn query_value(url: &str, name: &str) -> String {
    url::Url::parse(url).unwrap().query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned()).unwrap()
}

#[tokio::test]
async fn a_full_flow_with_debug_logging_leaves_no_secret_in_the_logs() {
    full_flow_leaves_no_secret("text").await;
}

// Issue 10: the same in JSON lines: every line is one JSON object, still without a secret, and
// a tool call's lines carry the request id the client sent (echoed in the response).
#[tokio::test]
async fn a_full_flow_logged_as_json_lines_leaves_no_secret_and_carries_request_ids() {
    full_flow_leaves_no_secret("json").await;
}

const REQUEST_ID: &str = "log-test-request-4711";

async fn full_flow_leaves_no_secret(log_format: &str) {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let log_path = dir.path().join("server.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut server = broker(dir.path(), &base)
        .args(["serve", "--demo", "--listen", &format!("127.0.0.1:{port}"), "--log-format", log_format])
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    crate::helpers::eventually("the server answers /healthz", Duration::from_secs(30), || async {
        http.get(format!("{base}/healthz")).send().await.is_ok()
    })
    .await;
    // The demo banner (stdout) carries the demo password and a token: read them from there.
    let mut stdout = server.stdout.take().unwrap();
    let banner = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut buf = vec![0u8; 16 * 1024];
        let mut text = String::new();
        while !text.contains("or any MCP client") {
            let n = stdout.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        text
    })
    .await
    .unwrap();
    let password = banner
        .lines()
        .find_map(|l| l.trim().strip_prefix("password: "))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let token = banner.lines().skip_while(|l| !l.starts_with("Bearer token")).nth(1).unwrap().trim().to_owned();

    // Drive the flow over raw HTTP: initialize, a tool call that needs the demo provider.
    let mcp = format!("{base}/mcp");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {"url": {}}}, "clientInfo": {"name": "log-test", "version": "1"}}});
    let response = http
        .post(&mcp)
        .bearer_auth(&token)
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let _ = response.text().await;
    let post = |body: serde_json::Value| {
        http.post(&mcp)
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25")
            .json(&body)
            .send()
    };
    post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await.unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "provider_request",
        "arguments": {"provider": "demo", "method": "GET", "path": "/me"}}});
    let sse = post(call.clone()).await.unwrap().text().await.unwrap();
    let data = sse.lines().filter_map(|l| l.strip_prefix("data: ")).find(|l| l.contains("-32042")).expect("-32042");
    let error: serde_json::Value = serde_json::from_str(data).unwrap();
    let connect_url = error["error"]["data"]["elicitations"][0]["url"].as_str().unwrap().to_owned();

    // The browser: sign in, approve, approve at the provider, callback.
    let browser =
        reqwest::Client::builder().cookie_store(true).redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let path = connect_url.strip_prefix(&base).unwrap().to_owned();
    let login = browser.get(format!("{base}/login?next={path}")).send().await.unwrap().text().await.unwrap();
    let csrf = hidden_field(&login, "csrf_token").unwrap();
    let signed_in = browser
        .post(format!("{base}/login"))
        .form(&[
            ("username", "demo"),
            ("password", password.as_str()),
            ("next", path.as_str()),
            ("csrf_token", csrf.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 303);
    let session_cookie = signed_in
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("oauth_broker_session="))
        .unwrap();
    let session_cookie = session_cookie.split(';').next().unwrap().split('=').nth(1).unwrap().to_owned();
    let consent = browser.get(&connect_url).send().await.unwrap().text().await.unwrap();
    let consent_csrf = hidden_field(&consent, "csrf_token").unwrap();
    let approved = browser
        .post(&connect_url)
        .form(&[("csrf_token", consent_csrf.as_str()), ("action", "approve")])
        .send()
        .await
        .unwrap();
    let authorize = location(&approved);
    let state = query_value(&authorize, "state");
    let page = browser.get(&authorize).send().await.unwrap().text().await.unwrap();
    let mut form = hidden_fields(&page);
    form.push(("decision".into(), "approve".into()));
    let answer = browser.post(format!("{base}/demo-provider/authorize")).form(&form).send().await.unwrap();
    let callback = location(&answer);
    let code = query_value(&callback, "code");
    assert_eq!(browser.get(&callback).send().await.unwrap().status(), 303);
    let retried = http
        .post(&mcp)
        .bearer_auth(&token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .header("x-request-id", REQUEST_ID)
        .json(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call["params"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(retried.headers()["x-request-id"], REQUEST_ID, "a well-formed request id is echoed");
    let retried = retried.text().await.unwrap();
    // A malformed one (it could forge a log line) is replaced by one the broker makes.
    let forged = http.get(format!("{base}/healthz")).header("x-request-id", "a b\"c").send().await.unwrap();
    let made = forged.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(made != "a b\"c" && made.len() == 36, "{made}");
    assert!(retried.contains("demo-user"), "{retried}");

    let _ = server.kill();
    let _ = server.wait();

    // The provider tokens, opened from the database with the server's own key file.
    let key = std::fs::read_to_string(dir.path().join("encryption.key")).unwrap();
    let sealer = oauth_broker::crypto::Sealer::new(
        secrecy::ExposeSecret::expose_secret(
            &oauth_broker::crypto::Sealer::parse_key(&secrecy::SecretString::from(key.trim().to_owned())).unwrap(),
        ),
        &[],
    )
    .unwrap();
    let store = oauth_broker::store::Store::connect(&format!("sqlite://{}/oauth-broker.db", dir.path().display()))
        .await
        .unwrap();
    let grant = store.grants().all().await.unwrap().pop().unwrap();
    let owner = format!("{}/demo", grant.user_id);
    let open = |blob: &[u8], column: &str| {
        let ctx = oauth_broker::crypto::SealContext { table: "grants", column, row_id: &grant.id, owner: &owner };
        String::from_utf8(sealer.open(blob, ctx).unwrap()).unwrap()
    };
    let access = open(&grant.access_token_sealed, "access_token");
    let refresh = open(grant.refresh_token_sealed.as_deref().unwrap(), "refresh_token");

    let logs = std::fs::read_to_string(&log_path).unwrap();
    assert!(logs.contains("authorization completed"), "debug logs were captured:\n{logs}");
    let tool_lines: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains(REQUEST_ID) && l.contains("tool_call") && l.contains("provider_request"))
        .collect();
    assert!(!tool_lines.is_empty(), "the tool call's lines carry its request id:\n{logs}");
    if log_format == "json" {
        for line in logs.lines().filter(|l| !l.trim().is_empty()) {
            let parsed: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            assert!(parsed["timestamp"].is_string() && parsed["level"].is_string(), "{line}");
        }
        let request = logs
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|l| l["span"]["name"] == "request" && l["span"]["route"] == "/oauth/callback/{provider}")
            .expect("a line inside the callback's request span");
        assert_eq!(request["span"]["request_id"].as_str().unwrap().len(), 36, "a made request id: {request}");
        // Typed fields: a reader can add latencies up, filter by status.
        let lines: Vec<serde_json::Value> = logs.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let answered =
            lines.iter().find(|l| l["fields"]["message"] == "finished processing request").expect("a line per answer");
        assert!(answered["fields"]["latency_ms"].is_number(), "latency as a number: {answered}");
        assert!(answered["fields"]["status"].is_u64(), "status as a number: {answered}");
        let listening = lines
            .iter()
            .find(|l| l["fields"]["message"].as_str().is_some_and(|m| m.starts_with("oauth-broker listening on")))
            .expect("the listening line");
        assert_eq!(listening["target"], "oauth_broker::app", "logged where it comes from: {listening}");
        assert_eq!(listening["fields"]["version"], env!("CARGO_PKG_VERSION"), "{listening}");
    }
    for (what, secret) in [
        ("bearer token", token.as_str()),
        ("demo password", password.as_str()),
        ("browser session cookie", session_cookie.as_str()),
        ("consent CSRF token", consent_csrf.as_str()),
        ("OAuth state", state.as_str()),
        ("authorization code", code.as_str()),
        ("provider access token", access.as_str()),
        ("provider refresh token", refresh.as_str()),
        ("encryption key", key.trim()),
    ] {
        assert!(!logs.contains(secret), "the {what} appears in the server log");
    }
}
