//! The binary's contract: `migrate`, `admin users add`, `admin tokens issue` against the same
//! data dir a server uses, and that the printed token opens /mcp.

use std::io::Write;
use std::process::{Command, Stdio};

fn broker(data_dir: &std::path::Path, public_url: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_oauth-broker"));
    command.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
    command.env("OAUTH_BROKER_DATA_DIR", data_dir).env("OAUTH_BROKER_PUBLIC_URL", public_url);
    command
}

#[tokio::test]
async fn the_cli_creates_a_user_and_issues_a_token_the_server_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let public_url = format!("http://127.0.0.1:{port}");

    let migrate = broker(dir.path(), &public_url).arg("migrate").output().unwrap();
    assert!(migrate.status.success(), "{}", String::from_utf8_lossy(&migrate.stderr));

    let mut add = broker(dir.path(), &public_url)
        .args(["admin", "users", "add", "carol", "--password-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    add.stdin.take().unwrap().write_all(b"a-long-enough-password\n").unwrap();
    let added = add.wait_with_output().unwrap();
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    assert!(!String::from_utf8_lossy(&added.stdout).contains("a-long-enough-password"), "the password is not echoed");

    let duplicate = broker(dir.path(), &public_url).args(["admin", "users", "add", "carol"]).output().unwrap();
    assert!(!duplicate.status.success());
    assert!(String::from_utf8_lossy(&duplicate.stderr).contains("already exists"));

    let issued =
        broker(dir.path(), &public_url).args(["admin", "tokens", "issue", "carol", "--ttl", "1h"]).output().unwrap();
    assert!(issued.status.success(), "{}", String::from_utf8_lossy(&issued.stderr));
    let token = String::from_utf8(issued.stdout).unwrap().trim().to_owned();
    assert_eq!(token.split('.').count(), 3, "a JWT");

    let mut server =
        broker(dir.path(), &public_url).args(["serve", "--listen", &format!("127.0.0.1:{port}")]).spawn().unwrap();
    let http = reqwest::Client::new();
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "cli-test", "version": "1"}}});
    let mut status = None;
    for _ in 0..100 {
        match http
            .post(format!("{public_url}/mcp"))
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
        {
            Ok(response) => {
                status = Some(response.status());
                break;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(status.map(|s| s.as_u16()), Some(200), "the CLI-issued token opens /mcp");
}

#[test]
fn tokens_can_be_issued_for_a_named_client_and_consents_are_listed() {
    use base64::Engine;
    let dir = tempfile::tempdir().unwrap();
    let public_url = "http://127.0.0.1:9";
    let run = |args: &[&str]| broker(dir.path(), public_url).args(args).output().unwrap();
    assert!(run(&["migrate"]).status.success());
    let mut add = broker(dir.path(), public_url)
        .args(["admin", "users", "add", "dave", "--password-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    add.stdin.take().unwrap().write_all(b"a-long-enough-password\n").unwrap();
    assert!(add.wait().unwrap().success());

    let issued = run(&["admin", "tokens", "issue", "dave", "--client", "nightly-ci"]);
    assert!(issued.status.success(), "{}", String::from_utf8_lossy(&issued.stderr));
    let token = String::from_utf8(issued.stdout).unwrap();
    let payload = token.trim().split('.').nth(1).unwrap();
    let claims: serde_json::Value =
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    assert_eq!(claims["client_label"], "nightly-ci", "consents are kept for this program alone");

    for bad in ["", "two words", "<script>", &"x".repeat(65)] {
        let refused = run(&["admin", "tokens", "issue", "dave", "--client", bad]);
        assert!(!refused.status.success(), "label {bad:?}");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("--client label"), "label {bad:?}");
    }

    let listed = run(&["admin", "consents", "list", "--json"]);
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&listed.stdout).unwrap(), serde_json::json!([]));
    let unknown = run(&["admin", "consents", "revoke", "nobody", "--client", "token:nightly-ci"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no user named nobody"));
    let none = run(&["admin", "consents", "revoke", "dave", "--client", "token:nightly-ci"]);
    assert!(none.status.success());
    assert_eq!(String::from_utf8_lossy(&none.stdout).trim(), "withdrew 0 consent(s)");
}
