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

/// A data directory initialised by `migrate`, as a server would have it.
fn migrated(dir: &std::path::Path) {
    let migrate = broker(dir, "http://127.0.0.1:8080").arg("migrate").output().unwrap();
    assert!(migrate.status.success(), "{}", String::from_utf8_lossy(&migrate.stderr));
    assert!(dir.join("encryption.key").exists(), "migrate creates the key with the database");
}

fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_deleted_key_file_is_never_replaced_by_a_new_key_when_the_database_holds_sealed_values() {
    let dir = tempfile::tempdir().unwrap();
    migrated(dir.path());
    let key_file = dir.path().join("encryption.key");
    std::fs::remove_file(&key_file).unwrap();

    for args in [&["serve", "--listen", "127.0.0.1:0"][..], &["migrate"][..], &["admin", "users", "list"][..]] {
        let output = broker(dir.path(), "http://127.0.0.1:8080").args(args).output().unwrap();
        assert!(!output.status.success(), "{args:?} must refuse");
        let message = stderr_of(&output);
        assert!(message.contains(&key_file.display().to_string()), "{args:?} says where it looked: {message}");
        assert!(message.contains("sealed with key"), "{args:?} names the expected key: {message}");
        assert!(!key_file.exists(), "{args:?} wrote no new key where the backup must go");
    }
}

#[test]
fn a_corrupt_or_wrong_key_is_reported_against_the_file_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    migrated(dir.path());
    let key_file = dir.path().join("encryption.key");
    let original = std::fs::read_to_string(&key_file).unwrap();

    std::fs::write(&key_file, "not a key\n").unwrap();
    let corrupt = broker(dir.path(), "http://127.0.0.1:8080").args(["admin", "users", "list"]).output().unwrap();
    assert!(!corrupt.status.success());
    let message = stderr_of(&corrupt);
    assert!(message.contains(&key_file.display().to_string()), "names the file: {message}");
    assert!(!message.contains("OAUTH_BROKER_ENCRYPTION_KEY:"), "not a variable that was never set: {message}");

    // A valid key, but not this database's: refused before anything is written, saying which
    // key is expected, and the cause once.
    std::fs::write(&key_file, format!("{}\n", base64_key(7))).unwrap();
    let wrong = broker(dir.path(), "http://127.0.0.1:8080").args(["admin", "users", "list"]).output().unwrap();
    assert!(!wrong.status.success());
    let message = stderr_of(&wrong);
    assert!(message.contains("is not the key this database was created with"), "{message}");
    assert_eq!(message.matches("sealed with key").count(), 1, "the cause is said once: {message}");

    std::fs::write(&key_file, original).unwrap();
    let restored = broker(dir.path(), "http://127.0.0.1:8080").args(["admin", "users", "list"]).output().unwrap();
    assert!(restored.status.success(), "the restored key works: {}", stderr_of(&restored));
}

fn base64_key(byte: u8) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode([byte; 32])
}

#[test]
fn admin_commands_refuse_a_missing_database_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("dta");
    for args in [&["admin", "users", "list"][..], &["admin", "grants", "list"][..], &["admin", "services", "list"][..]]
    {
        let output = broker(&typo, "http://127.0.0.1:8080").args(args).output().unwrap();
        assert!(!output.status.success(), "{args:?} must refuse");
        let message = stderr_of(&output);
        assert!(message.contains("no database") && message.contains("migrate"), "{args:?}: {message}");
        assert!(!typo.exists(), "{args:?} created nothing (no directory, no database, no key)");
    }
}

fn add_user(dir: &std::path::Path, public_url: &str, name: &str) {
    let mut add = broker(dir, public_url)
        .args(["admin", "users", "add", name, "--password-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    add.stdin.take().unwrap().write_all(b"a-long-enough-password\n").unwrap();
    let added = add.wait_with_output().unwrap();
    assert!(added.status.success(), "{}", stderr_of(&added));
}

/// `admin users list` against the database file `db` (with `dir`'s key).
fn users_in(dir: &std::path::Path, db: &std::path::Path) -> String {
    let listed = broker(dir, "http://127.0.0.1:8080")
        .args(["--database-url", &format!("sqlite://{}", db.display()), "admin", "users", "list"])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{}", stderr_of(&listed));
    String::from_utf8_lossy(&listed.stdout).into_owned()
}

#[test]
fn admin_backup_writes_a_consistent_copy_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    migrated(dir.path());
    add_user(dir.path(), "http://127.0.0.1:8080", "carol");
    let copy = dir.path().join("copy.db");

    let backup = broker(dir.path(), "http://127.0.0.1:8080").args(["admin", "backup"]).arg(&copy).output().unwrap();
    assert!(backup.status.success(), "{}", stderr_of(&backup));
    assert!(String::from_utf8_lossy(&backup.stdout).contains("encryption.key"), "it reminds to back up the key");
    assert!(users_in(dir.path(), &copy).contains("carol"), "the copy holds the data");

    let again = broker(dir.path(), "http://127.0.0.1:8080").args(["admin", "backup"]).arg(&copy).output().unwrap();
    assert!(!again.status.success());
    assert!(stderr_of(&again).contains("already exists"));
}

#[tokio::test]
async fn after_sigterm_the_database_file_alone_holds_everything() {
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let public_url = format!("http://127.0.0.1:{port}");
    let mut server = broker(dir.path(), &public_url)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    let mut up = false;
    for _ in 0..200 {
        if http.get(format!("{public_url}/healthz")).send().await.is_ok_and(|r| r.status() == 200) {
            up = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(up, "the server came up");
    add_user(dir.path(), &public_url, "dave");

    let term = Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    assert!(term.success());
    assert!(server.wait().unwrap().success(), "a clean stop");

    let wal = dir.path().join("oauth-broker.db-wal");
    assert!(!wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0, "the write-ahead log was folded in");
    let alone = tempfile::tempdir().unwrap();
    let copy = alone.path().join("copy.db");
    std::fs::copy(dir.path().join("oauth-broker.db"), &copy).unwrap();
    assert!(users_in(dir.path(), &copy).contains("dave"), "a copy of the .db file alone holds the new user");
}

#[tokio::test]
async fn serve_demo_runs_in_oidc_mode_without_printing_a_local_token() {
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let public_url = format!("http://127.0.0.1:{port}");
    let config = dir.path().join("broker.toml");
    // The issuer need not answer for the server to start (it answers 503 until it does).
    std::fs::write(
        &config,
        "demo = true\n[identity]\nmode = \"oidc\"\nissuer = \"http://127.0.0.1:9\"\nclient_id = \"broker\"\n",
    )
    .unwrap();
    let server = broker(dir.path(), &public_url)
        .args(["--config", config.to_str().unwrap(), "serve", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    let mut demo_page = None;
    for _ in 0..200 {
        if let Ok(response) =
            http.get(format!("{public_url}/demo-provider/.well-known/oauth-authorization-server")).send().await
        {
            demo_page = Some(response.status());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let _ = Command::new("kill").args(["-TERM", &server.id().to_string()]).status();
    let output = server.wait_with_output().unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    assert_eq!(demo_page, Some(reqwest::StatusCode::OK), "the server started in oidc mode with the demo provider");
    assert!(printed.contains("identity from http://127.0.0.1:9"), "{printed}");
    assert!(!printed.contains("Bearer token for MCP clients"), "no local token in oidc mode: {printed}");
}
