//! The binary's contract: `migrate`, `admin users add`, `admin tokens issue` against the same
//! data dir a server uses, and that the printed token opens /mcp.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::helpers::TestApp;
use crate::helpers::cli::{broker, broker_for};
use crate::on_both_backends;

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
    let status = crate::helpers::eventually("the server answers /mcp", std::time::Duration::from_secs(30), || async {
        http.post(format!("{public_url}/mcp"))
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .map(|response| response.status())
    })
    .await;
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(status.as_u16(), 200, "the CLI-issued token opens /mcp");
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
    // Withdrawing nothing is a mistake worth a non-zero exit (issue 13), not "withdrew 0".
    let none = run(&["admin", "consents", "revoke", "dave", "--client", "token:nightly-ci"]);
    assert!(!none.status.success());
    assert!(String::from_utf8_lossy(&none.stderr).contains("dave has no consents"), "{}", stderr_of(&none));
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
    crate::helpers::eventually("the server comes up", std::time::Duration::from_secs(30), || async {
        http.get(format!("{public_url}/healthz")).send().await.is_ok_and(|r| r.status() == 200)
    })
    .await;
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
    let demo_page = crate::helpers::eventually("the server answers", std::time::Duration::from_secs(30), || async {
        let page = http.get(format!("{public_url}/demo-provider/.well-known/oauth-authorization-server")).send().await;
        page.map(|response| response.status())
    })
    .await;
    let _ = Command::new("kill").args(["-TERM", &server.id().to_string()]).status();
    let output = server.wait_with_output().unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    assert_eq!(demo_page, reqwest::StatusCode::OK, "the server started in oidc mode with the demo provider");
    assert!(printed.contains("identity from http://127.0.0.1:9"), "{printed}");
    assert!(!printed.contains("Bearer token for MCP clients"), "no local token in oidc mode: {printed}");
}

/// An example binary next to the test binary (`target/<profile>/examples/NAME`), built by
/// `cargo test`.
fn example_binary(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().and_then(|deps| deps.parent()).unwrap().join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: `cargo test` builds the examples (or `cargo build --example {name}`)",
        path.display()
    );
    path
}

/// Lines of a child's output until one satisfies `done`; panics with what was read if the
/// output ends first (the child exited).
fn read_until(lines: &mut impl Iterator<Item = std::io::Result<String>>, done: impl Fn(&str) -> bool) -> Vec<String> {
    let mut read = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let found = done(&line);
        read.push(line);
        if found {
            return read;
        }
    }
    panic!("the output ended before the expected line:\n{}", read.join("\n"));
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn jwt_claims(token: &str) -> serde_json::Value {
    use base64::Engine;
    let payload = token.trim().split('.').nth(1).unwrap();
    serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

// Issue 13: the printed client command carried `--token <jwt>` in its arguments, which every
// local user can read with `ps`.
#[test]
fn serve_demo_prints_a_client_command_that_passes_the_token_in_the_environment() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let public_url = format!("http://127.0.0.1:{port}");
    let mut server = broker(dir.path(), &public_url)
        .args(["serve", "--demo", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(server.stdout.take().unwrap()).lines();
    let printed = read_until(&mut lines, |line| line.contains("oauth-broker admin tokens issue"));
    let after_heading = |heading: &str| {
        let at =
            printed.iter().position(|l| l.starts_with(heading)).unwrap_or_else(|| panic!("{heading}: {printed:?}"));
        printed[at + 1].trim().to_owned()
    };
    let token = after_heading("Bearer token for MCP clients");
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let command = after_heading("Try the whole flow with the bundled client");

    // Arrange the printed line as a shell would: leading NAME=VALUE words are the environment.
    let words: Vec<&str> = command.split_whitespace().collect();
    let env_words = words.iter().take_while(|w| w.contains('=') && !w.starts_with('-')).count();
    let (env, argv) = words.split_at(env_words);
    assert_eq!(env, [format!("OAUTH_BROKER_TOKEN={token}").as_str()], "{command}");
    assert!(argv.iter().all(|w| !w.contains(&token) && !w.contains(&token[..20])), "no token in argv: {command}");
    assert!(!argv.contains(&"--token"), "{command}");
    assert_eq!(argv[..4], ["cargo", "run", "--example", "demo_client"], "{command}");
    let client_args = &argv[argv.iter().position(|w| *w == "--").unwrap() + 1..];

    // The bundled client, run as printed, reads the token from there and gets as far as the link.
    let mut client = Command::new(example_binary("demo_client"))
        .env_clear()
        .env("OAUTH_BROKER_TOKEN", &token)
        .args(client_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut client_lines = std::io::BufReader::new(client.stdout.take().unwrap()).lines();
    let shown = read_until(&mut client_lines, |line| line.contains(&format!("{public_url}/connect/")));
    assert!(shown.iter().any(|l| l.starts_with("Connected to")), "{shown:?}");
    let _ = client.kill();
    let _ = client.wait();

    // The printed reissue command keeps the demo client's label, so its approvals still apply.
    let reissue = after_heading("A new token for the same client");
    let reissue_args: Vec<&str> = reissue.split_whitespace().skip(1).collect();
    assert_eq!(reissue_args[..3], ["admin", "tokens", "issue"], "{reissue}");
    let issued = broker(dir.path(), &public_url).args(&reissue_args).output().unwrap();
    assert!(issued.status.success(), "{}", stderr_of(&issued));
    assert_eq!(jwt_claims(&String::from_utf8_lossy(&issued.stdout))["client_label"], "demo_client");
    assert_eq!(jwt_claims(&token)["client_label"], "demo_client");

    let _ = Command::new("kill").args(["-TERM", &server.id().to_string()]).status();
    let _ = server.wait();
}

// Issue 13: the six settings were repeated in every subcommand's help, even `admin users`, and
// positional arguments had no description.
#[test]
fn help_shows_the_settings_once_and_each_command_its_own_arguments_first() {
    let dir = tempfile::tempdir().unwrap();
    let help = |args: &[&str]| {
        let output = broker(dir.path(), "http://127.0.0.1:8080").args(args).arg("--help").output().unwrap();
        assert!(output.status.success(), "{args:?}: {}", stderr_of(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let top = help(&[]);
    for setting in ["--config <", "--listen <", "--public-url <", "--database-url <", "--data-dir <", "--demo "] {
        assert_eq!(top.matches(setting).count(), 1, "top-level help lists {setting} once: {top}");
    }

    // clap prints an option's environment value in --help; a database URL can hold a password.
    let with_password = broker(dir.path(), "http://127.0.0.1:8080")
        .env("OAUTH_BROKER_DATABASE_URL", "postgres://broker:s3cret-pw@db.example/broker")
        .arg("--help")
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&with_password.stdout).contains("s3cret-pw"), "no password in --help");

    let users = help(&["admin", "users"]);
    assert!(!users.contains("--data-dir <") && !users.contains("--public-url <"), "{users}");
    let revoke = help(&["admin", "consents", "revoke"]);
    let options = revoke.split("Options:").nth(1).unwrap();
    assert!(options.trim_start().starts_with("--client <CLIENT>"), "its own option first: {revoke}");
    assert!(!revoke.contains("--database-url <"), "{revoke}");
    assert!(revoke.contains("<USER>  The user"), "the positional says what it is: {revoke}");
    assert!(help(&["admin", "backup"]).contains("<FILE>  Where to write the copy"));
    assert!(help(&["admin", "users", "add"]).contains("<NAME>  The username"));

    // Still accepted after the command's name, as the README and scripts give them.
    let typo = dir.path().join("dta");
    let listed = broker(dir.path(), "http://127.0.0.1:8080")
        .args(["admin", "users", "list", "--data-dir"])
        .arg(&typo)
        .output()
        .unwrap();
    assert!(!listed.status.success());
    assert!(stderr_of(&listed).contains(&typo.display().to_string()), "{}", stderr_of(&listed));
}

// Issue 13: `migrate --status` listed the migrations the binary knows, not which were applied.
#[tokio::test]
async fn migrate_status_says_which_migrations_are_applied_and_which_are_pending() {
    let dir = tempfile::tempdir().unwrap();
    let status = || {
        let output = broker(dir.path(), "http://127.0.0.1:8080").args(["migrate", "--status"]).output().unwrap();
        assert!(output.status.success(), "{}", stderr_of(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let fresh = status();
    assert!(fresh.contains("   1  pending  initial") && fresh.contains("0 applied"), "{fresh}");
    assert!(!dir.path().join("oauth-broker.db").exists(), "--status creates no database");

    migrated(dir.path());
    let done = status();
    assert!(done.contains("   1  applied  initial") && !done.contains("pending "), "{done}");
    assert!(done.contains(" applied, 0 pending"), "{done}");

    // As after an upgrade: the newest migration not yet run here.
    let url = format!("sqlite://{}", dir.path().join("oauth-broker.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let (newest, name): (i64, String) =
        sqlx::query_as("SELECT version, description FROM _sqlx_migrations ORDER BY version DESC LIMIT 1")
            .fetch_one(&pool)
            .await
            .unwrap();
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = $1").bind(newest).execute(&pool).await.unwrap();
    // Counted, not `newest - 1`: version numbers may skip (numbers reserved for other work).
    let (left,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM _sqlx_migrations").fetch_one(&pool).await.unwrap();
    pool.close().await;
    let upgrade = status();
    assert!(upgrade.contains(&format!("{newest:>4}  pending  {name}")), "{upgrade}");
    assert!(upgrade.contains(&format!("{left} applied, 1 pending")), "{upgrade}");
}

async fn applied_versions_are_read_from_the_database(app: &TestApp) {
    let applied = app.state.core.store.applied_migrations().await.unwrap();
    let known = app.state.core.store.known_migrations();
    assert_eq!(applied.iter().map(|a| a.version).collect::<Vec<_>>(), known.iter().map(|k| k.0).collect::<Vec<_>>());
    assert!(applied.iter().all(|a| a.success), "{applied:?}");
}
on_both_backends!(migrate_status_reads_the_migration_table, applied_versions_are_read_from_the_database);

async fn admin(app: &TestApp, args: &[&str]) -> std::process::Output {
    broker_for(app).arg("admin").args(args).output().await.unwrap()
}

async fn admin_ok(app: &TestApp, args: &[&str]) -> String {
    let output = admin(app, args).await;
    assert!(output.status.success(), "{args:?}: {}", stderr_of(&output));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A `YYYY-MM-DDTHH:MM:SSZ` anywhere in `text`.
fn has_iso_time(text: &str) -> bool {
    text.split_whitespace().any(|w| {
        let b = w.as_bytes();
        b.len() == 20
            && b[4] == b'-'
            && b[10] == b'T'
            && b[19] == b'Z'
            && b.iter().enumerate().all(|(i, c)| [4, 7, 10, 13, 16, 19].contains(&i) || c.is_ascii_digit())
    })
}

// Issue 13: admin tables showed user UUIDs and epoch numbers, `audit` had no header, and
// `consents revoke alice --client demo_client` withdrew nothing (the key is
// `token:demo_client`) and still exited 0.
async fn admin_tables_name_users_show_iso_times_and_revoke_refuses_a_key_that_matches_nothing(app: &TestApp) {
    use crate::helpers::{ALICE, ClientKind};
    let token = app.token_for_client(ALICE, "demo_client").await;
    let client = app.mcp_client_with_token(&token, ClientKind::Url).await.unwrap();
    let error = match client
        .call("provider_request", serde_json::json!({"provider": "demo", "method": "GET", "path": "/me"}))
        .await
    {
        Err(rmcp::ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    let url = error.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();
    assert_eq!(app.approve_in_browser(&app.browser(), &url, ALICE).await.status(), 200);
    let alice_id = app.user_id(ALICE).await;

    for (args, header) in [
        (&["grants", "list"][..], "USER"),
        (&["consents", "list"][..], "USER"),
        (&["authorizations", "list"][..], "ID"),
        (&["audit"][..], "TIME"),
    ] {
        let table = admin_ok(app, args).await;
        let mut lines = table.lines();
        assert!(lines.next().unwrap().starts_with(header), "{args:?} has a header row: {table}");
        assert!(table.contains(ALICE) && !table.contains(&alice_id), "{args:?} names the user: {table}");
        assert!(has_iso_time(&table), "{args:?} shows ISO 8601 times: {table}");
    }
    let users = admin_ok(app, &["users", "list"]).await;
    assert!(
        users.starts_with("USER") && users.contains(&alice_id) && has_iso_time(&users),
        "the id has its own column: {users}"
    );
    let json: serde_json::Value = serde_json::from_str(&admin_ok(app, &["grants", "list", "--json"]).await).unwrap();
    assert_eq!((json[0]["user"].as_str(), json[0]["user_id"].as_str()), (Some(ALICE), Some(alice_id.as_str())));

    let consents = admin_ok(app, &["consents", "list"]).await;
    assert!(consents.contains("token:demo_client"), "{consents}");
    let wrong = admin(app, &["consents", "revoke", ALICE, "--client", "demo_client"]).await;
    assert!(!wrong.status.success(), "withdrawing nothing fails");
    let message = stderr_of(&wrong);
    assert!(
        message.contains("nothing was withdrawn") && message.contains("token:demo_client"),
        "says what would match: {message}"
    );
    assert!(admin_ok(app, &["consents", "list"]).await.contains("token:demo_client"), "nothing changed");

    let revoked = admin_ok(app, &["consents", "revoke", ALICE, "--client", "token:demo_client"]).await;
    assert_eq!(revoked.trim(), "withdrew 1 consent(s)");
    assert!(!admin_ok(app, &["consents", "list"]).await.contains("token:demo_client"));

    // `grants revoke` that matched nothing said "no such grant" and exited 0; one that matched
    // said "revoked and deleted" whatever the provider answered.
    let wrong_account = admin(app, &["grants", "revoke", ALICE, "demo", "--account", "someone-else"]).await;
    assert!(!wrong_account.status.success(), "revoking nothing fails");
    let message = stderr_of(&wrong_account);
    assert!(
        message.contains("nothing was revoked") && message.contains("demo-user"),
        "lists what would match: {message}"
    );
    assert!(admin_ok(app, &["grants", "list"]).await.contains("demo-user"), "nothing changed");
    let revoked = admin_ok(app, &["grants", "revoke", ALICE, "demo"]).await;
    assert_eq!(revoked.trim(), "demo-user: revoked at the provider and deleted", "the provider's real answer");
    let again = admin(app, &["grants", "revoke", ALICE, "demo"]).await;
    assert!(!again.status.success() && stderr_of(&again).contains("has no grant at demo"), "{}", stderr_of(&again));
    client.close().await;
}
on_both_backends!(
    admin_output_is_for_people,
    admin_tables_name_users_show_iso_times_and_revoke_refuses_a_key_that_matches_nothing
);

// Issue 10: admins are made by the CLI, against the database a running server uses, and the
// server honours it at the next request.
async fn users_add_admin_and_set_admin_change_who_may_open_the_admin_pages(app: &TestApp) {
    let mut add = broker_for(app);
    add.args(["admin", "users", "add", "dora", "--admin", "--password-stdin"]).stdin(Stdio::piped());
    add.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = add.spawn().unwrap();
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(crate::helpers::PASSWORD.as_bytes()).await.unwrap();
    }
    let added = child.wait_with_output().await.unwrap();
    assert!(added.status.success(), "{}", stderr_of(&added));
    assert!(String::from_utf8_lossy(&added.stdout).contains("created user dora as an admin"));
    let listed: serde_json::Value = serde_json::from_str(&admin_ok(app, &["users", "list", "--json"]).await).unwrap();
    let dora = listed.as_array().unwrap().iter().find(|u| u["username"] == "dora").unwrap();
    assert_eq!(dora["admin"], true);

    let browser = app.browser();
    assert_eq!(app.sign_in(&browser, "dora", "/admin").await.status(), 303);
    assert_eq!(browser.get(app.url("/admin")).send().await.unwrap().status(), 200, "an admin opens /admin");

    // Issue 29: `users add` and `tokens issue` from the CLI are audited (never the token).
    let token = admin_ok(app, &["tokens", "issue", "dora", "--client", "ci"]).await;
    let audited = app.state.core.store.audit().entries(None, 50).await.unwrap();
    let cli_did = |action: &str| {
        audited.iter().find(|e| e.action == action && e.actor.as_deref() == Some("cli")).map(|e| e.detail.clone())
    };
    assert_eq!(cli_did("admin.user_added"), Some(Some("username=\"dora\" org=default role=member".to_owned())));
    let issued = cli_did("admin.token_issued").flatten().expect("tokens issue is audited");
    assert!(issued.contains("client=\"ci\"") && !issued.contains(token.trim()), "{issued}");

    // Issue 29: the last enabled admin is not unmade or disabled without --force.
    for last in [&["users", "set-admin", "dora", "false"][..], &["users", "disable", "dora"][..]] {
        let refused = admin(app, last).await;
        assert!(!refused.status.success(), "{last:?}");
        assert!(
            stderr_of(&refused).contains("last enabled admin") && stderr_of(&refused).contains("--force"),
            "{last:?}"
        );
    }
    assert_eq!(browser.get(app.url("/admin")).send().await.unwrap().status(), 200, "nothing changed");
    let off = admin_ok(app, &["users", "set-admin", "dora", "false", "--force"]).await;
    assert!(off.contains("no longer an admin"), "{off}");
    assert_eq!(browser.get(app.url("/admin")).send().await.unwrap().status(), 403, "at the next request");
    admin_ok(app, &["users", "set-admin", "dora", "true"]).await;
    assert_eq!(browser.get(app.url("/admin")).send().await.unwrap().status(), 200);

    for bad in [&["users", "set-admin", "nobody", "true"][..], &["users", "set-admin", "dora", "maybe"][..]] {
        let refused = admin(app, bad).await;
        assert!(!refused.status.success(), "{bad:?} fails");
        assert!(!stderr_of(&refused).is_empty(), "{bad:?} says why");
    }
    let listed: serde_json::Value = serde_json::from_str(&admin_ok(app, &["users", "list", "--json"]).await).unwrap();
    assert_eq!(listed.as_array().unwrap().iter().find(|u| u["username"] == "dora").unwrap()["admin"], true);
}
on_both_backends!(cli_makes_admins, users_add_admin_and_set_admin_change_who_may_open_the_admin_pages);

// Issue 10: the admin pages told an admin to "use the CLI" to disable their own account, and
// the CLI had no such command. Disabling from the CLI ends the user's browser sessions and
// refuses their tokens at the next request; enabling restores the tokens.
async fn users_disable_and_enable_take_effect_at_the_next_request(app: &TestApp) {
    use crate::helpers::{ALICE, ClientKind};
    let browser = app.browser();
    assert_eq!(app.sign_in(&browser, ALICE, "/connections").await.status(), 303);
    assert_eq!(browser.get(app.url("/connections")).send().await.unwrap().status(), 200);
    let token = app.token_for(ALICE).await;
    assert!(app.mcp_client_with_token(&token, ClientKind::Url).await.is_ok(), "the token works before");

    let disabled = admin_ok(app, &["users", "disable", ALICE]).await;
    assert!(disabled.contains("is disabled") && disabled.contains("1 browser session(s) ended"), "{disabled}");
    let page = browser.get(app.url("/connections")).send().await.unwrap();
    assert_eq!(page.status(), 303, "the browser session ended: sent to sign in");
    // The CLI is another process: the server's caches learn of it from the database within the
    // watcher's interval (issue 11), so this waits for the refusal, boundedly.
    crate::helpers::eventually("the token is refused", std::time::Duration::from_secs(5), || async {
        app.mcp_client_with_token(&token, ClientKind::Url).await.is_err()
    })
    .await;
    let audit = admin_ok(app, &["audit", "--user", ALICE]).await;
    assert!(audit.contains("admin.user_disabled") && audit.contains("ACTOR"), "{audit}");
    let audit: serde_json::Value =
        serde_json::from_str(&admin_ok(app, &["audit", "--user", ALICE, "--json"]).await).unwrap();
    let disabled = audit.as_array().unwrap().iter().find(|e| e["action"] == "admin.user_disabled").unwrap();
    assert_eq!(disabled["actor"], "cli", "the CLI is the actor, in its own column");
    assert_eq!(disabled["detail"], "sessions_ended=1");

    assert!(admin_ok(app, &["users", "enable", ALICE]).await.contains("enabled again"));
    assert!(app.mcp_client_with_token(&token, ClientKind::Url).await.is_ok(), "the token works again");
    let unknown = admin(app, &["users", "disable", "nobody"]).await;
    assert!(!unknown.status.success() && stderr_of(&unknown).contains("no user named nobody"));
}
on_both_backends!(cli_disables_users, users_disable_and_enable_take_effect_at_the_next_request);

// Issue 10: `admin audit --follow` tails the log a running server writes: the newest entries
// first, then each new one as it is written (here: a failed sign-in at the server), one JSON
// object per line with --json; SIGTERM ends it cleanly. A bad --limit is refused.
async fn audit_follow_prints_what_a_running_server_writes_and_ends_on_sigterm(app: &TestApp) {
    let mut follow = Following::start(broker_for(app));
    // The server writes an entry after the command started: a wrong password.
    assert_eq!(sign_in_with(app, "alice", "wrong-password-for-follow").await, 401);
    let (line, _) = follow.until("the new entry", |l| l.contains("browser.sign_in_failed")).await;
    let seen: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!((seen["actor"].as_str(), seen["outcome"].as_str()), (Some("visitor"), Some("refused")), "{seen}");
    assert!(!seen.to_string().contains("wrong-password-for-follow"), "never the password");
    follow.stop().await;

    for bad in [&["audit", "--limit", "0"][..], &["audit", "--limit", "-5"][..], &["audit", "--user", "nobody"][..]] {
        let refused = admin(app, bad).await;
        assert!(!refused.status.success() && !stderr_of(&refused).is_empty(), "{bad:?} is refused with a reason");
    }
}
on_both_backends!(cli_audit_follow, audit_follow_prints_what_a_running_server_writes_and_ends_on_sigterm);

/// A wrong password for `name` at the running server: one `browser.sign_in_failed` entry that
/// names `name`.
async fn fail_a_sign_in(app: &TestApp, name: &str) {
    assert_eq!(sign_in_with(app, name, "a-wrong-password").await, 401);
}

/// Reads `lines` until one satisfies `wanted` (30 s at most): that line and what came before,
/// or what came before the stream ended.
async fn read_lines_until<R: tokio::io::AsyncBufRead + Unpin>(
    lines: &mut tokio::io::Lines<R>,
    what: &str,
    wanted: impl Fn(&str) -> bool,
) -> Result<(String, Vec<String>), Vec<String>> {
    let mut before = Vec::new();
    let found = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            match lines.next_line().await.unwrap() {
                Some(line) if wanted(&line) => return Some(line),
                Some(line) => before.push(line),
                None => return None,
            }
        }
    })
    .await;
    match found.unwrap_or_else(|_| panic!("no {what} within 30 s: {before:?}")) {
        Some(line) => Ok((line, before)),
        None => Err(before),
    }
}

/// `admin audit --follow --json --limit 5` run by `command` (the binary set up for an app),
/// its standard output and error read line by line.
struct Following {
    child: tokio::process::Child,
    out: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    err: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
}

impl Following {
    fn start(mut command: tokio::process::Command) -> Self {
        use tokio::io::AsyncBufReadExt;
        let mut child = command
            .args(["admin", "audit", "--follow", "--json", "--limit", "5"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let err = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        Self { child, out, err }
    }

    /// The first printed line `wanted` accepts, and the lines before it; fails with what the
    /// command said on standard error if it ended first.
    async fn until(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> (String, Vec<String>) {
        match read_lines_until(&mut self.out, what, wanted).await {
            Ok(found) => found,
            Err(printed) => {
                let said = read_lines_until(&mut self.err, "the end of its errors", |_| false).await.unwrap_err();
                panic!("follow ended before {what}: {said:?} (it printed {printed:?})")
            }
        }
    }

    /// The first line on standard error that `wanted` accepts.
    async fn said(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let found = read_lines_until(&mut self.err, what, wanted).await;
        found.unwrap_or_else(|said| panic!("follow ended before {what}: {said:?}")).0
    }

    /// SIGTERM, as a service manager stops it: the tail ends cleanly within 10 s.
    async fn stop(mut self) {
        assert!(self.child.try_wait().unwrap().is_none(), "the tail was still running");
        let term = Command::new("kill").args(["-TERM", &self.child.id().unwrap().to_string()]).status().unwrap();
        assert!(term.success());
        let status =
            tokio::time::timeout(std::time::Duration::from_secs(10), self.child.wait()).await.unwrap().unwrap();
        assert!(status.success(), "SIGTERM ends --follow cleanly: {status:?}");
    }
}

// A tail that dies when the database blinks leaves an operator blind exactly when something is
// wrong. Its database connections go through a proxy the test cuts while the server (connected
// directly) keeps writing: the tail says it is waiting, and prints what was written meanwhile
// once the database answers again, with nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_follow_waits_out_a_database_outage_and_prints_what_was_written_meanwhile() {
    use crate::helpers::db_proxy::{DbProxy, Mode, postgres_upstream};
    let Some(app) = crate::helpers::spawn_app(crate::helpers::Backend::Postgres).await else { return };
    let proxy = DbProxy::start(postgres_upstream()).await;
    let config = tempfile::NamedTempFile::new().unwrap();
    // Short enough that the outage is noticed soon, long enough for a connect on a busy machine.
    std::fs::write(config.path(), "database_timeout = \"3s\"\n").unwrap();
    let mut follow = Following::start({
        let mut command = broker_for(&app);
        command
            .env("OAUTH_BROKER_DATABASE_URL", proxy.url_for(&app.state.core.config.database_url))
            .env("OAUTH_BROKER_CONFIG", config.path());
        command
    });
    let names = |line: &str, name: &str| line.contains("browser.sign_in_failed") && line.contains(name);

    fail_a_sign_in(&app, "before-the-outage").await;
    follow.until("the entry written before the outage", |l| names(l, "before-the-outage")).await;

    proxy.set(Mode::Cut);
    let waiting = follow.said("word of the outage", |l| l.contains("does not answer")).await;
    assert!(!waiting.contains("postgres://"), "no database URL in what it says: {waiting}");
    fail_a_sign_in(&app, "during-the-outage").await;

    proxy.set(Mode::Forward);
    let (_, between) = follow.until("the entry written during the outage", |l| names(l, "during-the-outage")).await;
    assert!(!between.iter().any(|l| names(l, "before-the-outage")), "nothing twice: {between:?}");
    follow.said("word that it answers again", |l| l.contains("answers again")).await;
    follow.stop().await;
    app.stop().await;
}

// PostgreSQL hands out an audit id at insert, not at commit: a row that took its id before
// `--follow` read its first window, but committed after a higher one was shown there, is still
// printed (once) when it commits, instead of being stepped over for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_follow_prints_a_row_that_commits_after_a_higher_id_was_shown_first() {
    use sqlx::Connection;
    let Some(app) = crate::helpers::spawn_app(crate::helpers::Backend::Postgres).await else { return };
    // A writer takes its id and has not committed yet ...
    let mut late = sqlx::PgConnection::connect(&app.state.core.config.database_url).await.unwrap();
    let mut open = late.begin().await.unwrap();
    sqlx::query(
        "INSERT INTO audit_log (at, action, detail, actor, outcome) \
         VALUES (0, 'browser.sign_in_failed', 'username=\"committed-late\"', 'visitor', 'refused')",
    )
    .execute(&mut *open)
    .await
    .unwrap();
    // ... while a higher id commits, and the tail starts with it in its first window.
    fail_a_sign_in(&app, "shown-first").await;
    let mut follow = Following::start(broker_for(&app));
    follow.until("the first window's entry", |l| l.contains("shown-first")).await;

    open.commit().await.unwrap();
    let (_, between) = follow.until("the row that committed late", |l| l.contains("committed-late")).await;
    assert!(!between.iter().any(|l| l.contains("shown-first")), "nothing twice: {between:?}");
    follow.stop().await;
    app.stop().await;
}

/// `admin ARGS` with `input` on standard input (a password), as an operator pipes it.
async fn admin_with_stdin(app: &TestApp, args: &[&str], input: &str) -> std::process::Output {
    use tokio::io::AsyncWriteExt;
    let mut child = broker_for(app)
        .arg("admin")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    child.wait_with_output().await.unwrap()
}

/// The sign-in form's answer for `name` with `password` at the running server.
async fn sign_in_with(app: &TestApp, name: &str, password: &str) -> u16 {
    let browser = app.browser();
    let html = browser.get(app.url("/login?next=%2F")).send().await.unwrap().text().await.unwrap();
    let csrf = crate::helpers::hidden_field(&html, "csrf_token").unwrap();
    let form = [("username", name), ("password", password), ("next", "/"), ("csrf_token", csrf.as_str())];
    browser.post(app.url("/login")).form(&form).send().await.unwrap().status().as_u16()
}

// Issue 10: every admin command is tried against the database a running server uses. `users
// passwd` and `authorizations purge` had no test; bad input to them changes nothing.
async fn users_passwd_and_authorizations_purge_act_on_a_running_servers_database(app: &TestApp) {
    use crate::helpers::{ALICE, ClientKind, PASSWORD};
    // Arrange: Alice signed in at the server, and one connect attempt of hers open.
    let signed_in = app.browser();
    assert_eq!(app.sign_in(&signed_in, ALICE, "/connections").await.status(), 303);
    assert_eq!(signed_in.get(app.url("/connections")).send().await.unwrap().status(), 200);
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let ask = serde_json::json!({"provider": "demo", "method": "GET", "path": "/me"});
    assert!(client.call("provider_request", ask.clone()).await.is_err(), "-32042: an attempt is open");
    let attempts = || async {
        let (n,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM authorizations").fetch_one(app.state.core.store.pool()).await.unwrap();
        n
    };
    assert_eq!(attempts().await, 1);

    // Bad input changes nothing: an unknown user, an empty password.
    let unknown = admin_with_stdin(app, &["users", "passwd", "nobody"], "a-new-password-for-nobody\n").await;
    assert!(
        !unknown.status.success() && stderr_of(&unknown).contains("no user named nobody"),
        "{}",
        stderr_of(&unknown)
    );
    let empty = admin_with_stdin(app, &["users", "passwd", ALICE], "\n").await;
    assert!(!empty.status.success() && stderr_of(&empty).contains("no password"), "{}", stderr_of(&empty));
    assert_eq!(sign_in_with(app, ALICE, PASSWORD).await, 303, "the old password still works");
    assert_eq!(signed_in.get(app.url("/connections")).send().await.unwrap().status(), 200, "still signed in");

    // Act: a new password.
    let changed = admin_with_stdin(app, &["users", "passwd", ALICE], "a-brand-new-password\n").await;
    assert!(changed.status.success(), "{}", stderr_of(&changed));
    assert!(String::from_utf8_lossy(&changed.stdout).contains("password changed for alice"));

    // Assert: the server takes the new one at once, refuses the old one, and the browser
    // sessions of before are signed out.
    assert_eq!(sign_in_with(app, ALICE, PASSWORD).await, 401, "the old password is refused");
    assert_eq!(sign_in_with(app, ALICE, "a-brand-new-password").await, 303, "the new one signs in");
    assert_eq!(signed_in.get(app.url("/connections")).send().await.unwrap().status(), 303, "signed out");

    // `authorizations purge` deletes only attempts that expired.
    let kept = admin_ok(app, &["authorizations", "purge"]).await;
    assert_eq!(kept.trim(), "removed 0 expired authorizations");
    assert_eq!(attempts().await, 1, "an open attempt is kept");
    sqlx::query("UPDATE authorizations SET expires_at = $1")
        .bind(app.now() - 3600)
        .execute(app.state.core.store.pool())
        .await
        .unwrap();
    // Issue 29: the list said `pending` for an attempt past its expiry; it reads as the pages do.
    let listed: serde_json::Value =
        serde_json::from_str(&admin_ok(app, &["authorizations", "list", "--json"]).await).unwrap();
    assert_eq!(listed[0]["status"], "expired", "{listed}");
    assert!(admin_ok(app, &["authorizations", "list"]).await.contains("expired"));
    let purged = admin_ok(app, &["authorizations", "purge"]).await;
    assert_eq!(purged.trim(), "removed 1 expired authorizations");
    assert_eq!(attempts().await, 0);
    // The server is not confused by it: the next call opens a fresh attempt.
    assert!(client.call("provider_request", ask).await.is_err(), "-32042 again");
    assert_eq!(attempts().await, 1);
    client.close().await;
}
on_both_backends!(cli_passwd_and_purge, users_passwd_and_authorizations_purge_act_on_a_running_servers_database);

/// `providers list | head -2`: a reader that stops early ends the command quietly (before, the
/// first write to the closed pipe panicked with a stack trace). The read end is closed before
/// the command writes at all, so the write always meets it closed.
#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["providers", "list"][..], &["providers", "list", "--json"], &["--help"]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = broker(dir.path(), "http://127.0.0.1:9")
            .args(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
            .wait_with_output()
            .unwrap();
        let stderr = stderr_of(&output);
        assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "{args:?}: {stderr}");
    }
}

/// `serve --demo | head -3`: the banner meets a closed pipe, and the server keeps serving
/// (before, printing it panicked and the server never started).
#[tokio::test]
async fn serve_demo_keeps_serving_when_its_banner_meets_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut server = broker(dir.path(), &format!("http://127.0.0.1:{port}"))
        .args(["serve", "--demo", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(writer)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    let ready = crate::helpers::eventually("serve answers /readyz", std::time::Duration::from_secs(30), || {
        let exited = server.try_wait().unwrap().is_some();
        let http = http.clone();
        async move {
            if exited {
                return Some(false);
            }
            let ready = http.get(format!("http://127.0.0.1:{port}/readyz")).send().await;
            ready.is_ok_and(|r| r.status() == 200).then_some(true)
        }
    })
    .await;
    // The banner is printed before the server serves: answering at all means it got past it.
    let still = http.get(format!("http://127.0.0.1:{port}/healthz")).send().await.is_ok();
    let alive = server.try_wait().unwrap().is_none();
    let _ = server.kill();
    let _ = server.wait();
    assert!(ready && still && alive, "the server kept serving");
}

#[test]
fn providers_list_has_a_header_row_and_the_redirect_uri_of_each_enabled_provider() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("broker.toml");
    std::fs::write(&config, "[providers.github]\nclient_id = \"id\"\nclient_secret = \"secret\"\n").unwrap();
    let output = broker(dir.path(), "http://127.0.0.1:9")
        .args(["--config", config.to_str().unwrap(), "providers", "list"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    for column in ["ID", "ENABLED", "NAME", "AUTH", "DEFAULT SCOPES", "REDIRECT URI TO REGISTER"] {
        assert!(header.contains(column), "the header names {column}: {header}");
    }
    let github = lines.find(|line| line.starts_with("github ")).unwrap_or_else(|| panic!("a github row: {text}"));
    assert!(github.contains(" yes ") && github.ends_with("http://127.0.0.1:9/oauth/callback/github"), "{github}");
    let gitlab = text.lines().find(|line| line.starts_with("gitlab ")).unwrap();
    assert!(gitlab.contains(" no ") && gitlab.ends_with(" -"), "not enabled, no URI: {gitlab}");
}

/// Each setting an operator can get wrong is refused in the operator's words, naming the
/// setting and how to write it (not the parser's "relative URL without a base").
#[test]
fn wrong_settings_are_refused_in_the_operators_words() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let output = broker(dir.path(), "http://127.0.0.1:9").args(args).output().unwrap();
        assert!(!output.status.success(), "{args:?} is refused");
        stderr_of(&output)
    };

    let port = run(&["serve", "--port", "18484"]);
    assert!(port.contains("--listen IP:PORT") && port.contains("--listen 127.0.0.1:8080"), "{port}");

    let url = run(&["--public-url", "127.0.0.1:18484", "migrate"]);
    assert!(url.contains("has no scheme") && url.contains("http://127.0.0.1:18484"), "{url}");
    assert!(!url.contains("relative URL without a base"), "{url}");

    let config = dir.path().join("broker.toml");
    std::fs::write(&config, "authorization_ttl = \"ten minutes\"\n").unwrap();
    let ttl = run(&["--config", config.to_str().unwrap(), "migrate"]);
    assert!(ttl.contains("authorization_ttl") && ttl.contains("\"ten minutes\" is not a duration"), "{ttl}");
    assert!(!ttl.contains("expected number"), "{ttl}");

    let ttl_flag = run(&["admin", "tokens", "issue", "alice", "--ttl", "an hour"]);
    assert!(ttl_flag.contains("\"an hour\" is not a duration"), "{ttl_flag}");
}

/// An unreachable PostgreSQL is named by host and port with what the connect said, once.
#[test]
fn an_unreachable_postgres_is_named_by_host_and_port() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = dir.path().join("broker.toml");
    std::fs::write(&config, "database_timeout = \"1s\"\n").unwrap();
    let output = broker(dir.path(), "http://127.0.0.1:9")
        .args(["--config", config.to_str().unwrap(), "migrate"])
        .env("OAUTH_BROKER_DATABASE_URL", format!("postgres://postgres:hunter2@127.0.0.1:{port}/test"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = stderr_of(&output);
    let named = format!("connection refused at 127.0.0.1:{port}");
    assert_eq!(stderr.matches(&named).count(), 1, "named once: {stderr}");
    assert!(!stderr.contains("pool timed out") && !stderr.contains("hunter2"), "{stderr}");
}

#[test]
fn version_names_the_release() {
    let dir = tempfile::tempdir().unwrap();
    let output = broker(dir.path(), "http://127.0.0.1:9").arg("--version").output().unwrap();
    assert!(output.status.success());
    assert_eq!(String::from_utf8(output.stdout).unwrap().trim(), format!("oauth-broker {}", env!("CARGO_PKG_VERSION")));
}

// Issue 29: clients are named by what the broker knows — the registered client and its id,
// the token's label — and the name a client reports for itself is shown apart, marked. Two
// different clients both calling themselves "Claude Desktop" read as two clients, on the
// admin page and in `authorizations list`.
async fn authorizations_name_clients_by_what_the_broker_knows_and_mark_what_they_call_themselves(app: &TestApp) {
    use oauth_broker::domain::Scopes;
    use oauth_broker::store::authorization_server::OAuthClientRow;
    use oauth_broker::store::authorizations::{AuthorizationKind, NewAuthorization};
    let store = &app.state.core.store;
    let alice = app.user_id(crate::helpers::ALICE).await;
    for id in ["app-one", "app-two"] {
        let row = OAuthClientRow {
            client_id: id.into(),
            client_secret_hash: None,
            token_endpoint_auth_method: oauth_broker::domain::AuthMethod::None,
            client_name: Some(format!("Registered {id}")),
            redirect_uris: vec!["http://127.0.0.1/cb".into()],
            refresh_allowed: false,
            scope: None,
            created_at: app.now(),
        };
        store.oauth_clients().insert(&row).await.unwrap();
    }
    let scopes = Scopes::parse(["profile"]).unwrap();
    for (id, key) in [("az-one", "client:app-one"), ("az-two", "client:app-two"), ("az-token", "token:nightly-job")] {
        let new = NewAuthorization {
            id,
            user_id: &alice,
            organization: &oauth_broker::domain::OrganizationId::default_organization(),
            provider: "demo",
            scopes: &scopes,
            client_name: Some("Claude Desktop"),
            mcp_session: None,
            client_key: key,
            kind: AuthorizationKind::Connect,
            grant_id: None,
            server_id: None,
            expires_at: app.now() + 600,
        };
        store.authorizations().create(&new, app.now()).await.unwrap();
    }

    let admin = crate::helpers::admin::admin_browser(app).await;
    let html = admin.get(app.url("/admin/authorizations")).send().await.unwrap().text().await.unwrap();
    for known in [
        "Registered app-one (name chosen by the app itself; client id app-one)",
        "Registered app-two (name chosen by the app itself; client id app-two)",
        "nightly-job (a program an operator issued you a token for)",
    ] {
        assert!(html.contains(known), "{known}: {html}");
    }
    assert_eq!(html.matches("\u{201c}Claude Desktop\u{201d} (its own word, unchecked)").count(), 3, "{html}");

    let listed = admin_ok(app, &["authorizations", "list"]).await;
    assert!(listed.lines().next().unwrap().contains("CLIENT") && listed.contains("CALLS ITSELF"), "{listed}");
    for key in ["client:app-one", "client:app-two", "token:nightly-job"] {
        let line = listed.lines().find(|l| l.contains(key)).unwrap_or_else(|| panic!("{key}: {listed}"));
        assert!(line.contains("\"Claude Desktop\" (unchecked)"), "{line}");
    }
    let json: Vec<serde_json::Value> =
        serde_json::from_str(&admin_ok(app, &["authorizations", "list", "--json"]).await).unwrap();
    let one = json.iter().find(|r| r["id"] == "az-one").unwrap();
    assert_eq!(one["client"], "client:app-one");
    assert_eq!(one["client_known_as"], "Registered app-one (name chosen by the app itself; client id app-one)");
    assert_eq!(one["client_name"], "Claude Desktop");
}
on_both_backends!(
    cli_and_pages_name_clients,
    authorizations_name_clients_by_what_the_broker_knows_and_mark_what_they_call_themselves
);
