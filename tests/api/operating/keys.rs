//! Key rotation (issue 12, "Keys"): `admin keys rotate|rewrap|drop|status` run as the real
//! binary against the database and data directory of a server that keeps serving; start-up
//! refuses while a value needs a key that is not loaded; the JWT signing key rotates with the
//! old public key still served until its tokens expire.

use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use oauth_broker::events::webhooks::signing::WebhookSecret;
use serde_json::{Value, json};

use crate::helpers::{ALICE, Backend, SpawnOptions, TestApp, spawn_app_opts};

async fn spawn(backend: Backend) -> Option<TestApp> {
    let options =
        SpawnOptions { key_in_data_dir: true, toml: "key_reload_interval = \"200ms\"\n".into(), ..Default::default() };
    spawn_app_opts(backend, options, |builder| builder).await
}

/// The binary, on the app's database and data directory.
fn broker(app: &TestApp) -> Command {
    let mut command = Command::new(crate::helpers::binary());
    command.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
    command
        .env("OAUTH_BROKER_DATA_DIR", app.data_dir())
        .env("OAUTH_BROKER_DATABASE_URL", &app.database_url)
        .env("OAUTH_BROKER_PUBLIC_URL", app.url(""));
    command
}

fn run(app: &TestApp, args: &[&str]) -> Output {
    broker(app).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn status(app: &TestApp) -> Value {
    let output = run(app, &["admin", "keys", "status", "--json"]);
    assert!(output.status.success(), "status: {}", text(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The encryption key entry with `state` ("active", "retired", "missing").
fn key_in<'a>(status: &'a Value, state: &str) -> &'a Value {
    status["encryption_keys"].as_array().unwrap().iter().find(|k| k["state"] == state).unwrap()
}

async fn me(client: &crate::helpers::McpClient) -> bool {
    let answer = client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    answer.is_ok_and(|result| result.structured_content.is_some_and(|c| c["status"] == 200))
}

async fn rotate_and_rewrap_while_the_server_serves_then_start_up_without_the_old_key(app: &TestApp) {
    // Arrange: a connection (sealed tokens), an open authorization (sealed PKCE verifier) and
    // the signing key, all under the first key; a client reading the connection non-stop.
    let client = Arc::new(app.connected_client(ALICE).await);
    let bob = app.mcp_client(crate::helpers::BOB, crate::helpers::ClientKind::Url).await;
    let pending = bob.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    let Err(rmcp::ServiceError::McpError(error)) = pending else { panic!("bob is asked to connect: {pending:?}") };
    let connect_url = error.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();
    approve_consent_only(app, &connect_url, crate::helpers::BOB).await;
    // A service's webhook in a rotation's overlap: two sealed signing secrets.
    let (service, first_secret, second_secret) = webhook_in_rotation(app).await;
    let before = status(app);
    let old = key_in(&before, "active")["id"].as_str().unwrap().to_owned();
    assert_eq!(key_in(&before, "active")["values"]["webhook signing secrets of services"], 1, "{before}");
    let before_total = key_in(&before, "active")["total"].as_i64().unwrap();
    assert!(before_total >= 4, "tokens, verifier and signing key are sealed: {before}");
    assert_eq!(key_in(&before, "active")["values"]["PKCE verifiers of open authorizations"], 1, "{before}");

    let stop = Arc::new(AtomicBool::new(false));
    let (served, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let reader = tokio::spawn({
        let (client, stop, served, failed) = (client.clone(), stop.clone(), served.clone(), failed.clone());
        async move {
            while !stop.load(Ordering::SeqCst) {
                let counter = if me(&client).await { &served } else { &failed };
                counter.fetch_add(1, Ordering::SeqCst);
            }
        }
    });

    // Act: rotate, then rewrap, while the reader runs.
    let rotated = run(app, &["admin", "keys", "rotate"]);
    assert!(rotated.status.success(), "rotate: {}", text(&rotated.stderr));
    let rewrapped = run(app, &["admin", "keys", "rewrap", "--batch", "1"]);
    assert!(rewrapped.status.success(), "rewrap: {} {}", text(&rewrapped.stdout), text(&rewrapped.stderr));
    let again = run(app, &["admin", "keys", "rewrap"]);
    assert!(again.status.success(), "a second rewrap finds nothing to do: {}", text(&again.stderr));
    assert!(text(&again.stdout).starts_with("0 sealed values moved"), "{}", text(&again.stdout));
    // The reader keeps going until it has read values sealed with the new key.
    let served_before = served.load(Ordering::SeqCst);
    crate::helpers::eventually("reads keep succeeding after the rewrap", Duration::from_secs(60), || async {
        let now = served.load(Ordering::SeqCst);
        if now >= served_before + 5 {
            Ok(())
        } else {
            Err(format!("{} served since, {} failed", now - served_before, failed.load(Ordering::SeqCst)))
        }
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    reader.await.unwrap();

    // Assert: nothing failed, everything moved, and the server seals with the new key.
    assert_eq!(failed.load(Ordering::SeqCst), 0, "every read during the rotation succeeded");
    let after = status(app);
    let new = key_in(&after, "active")["id"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert_eq!(key_in(&after, "active")["total"].as_i64().unwrap(), before_total, "{after}");
    assert_eq!(key_in(&after, "retired")["total"], 0, "the old key seals nothing any more: {after}");
    assert_eq!(app.state.core.sealer.active_key_id(), new, "the running server read the new key on its own");
    let raw = sqlx::query_as::<_, (Vec<u8>,)>("SELECT access_token_sealed FROM grants")
        .fetch_all(app.state.core.store.pool())
        .await
        .unwrap();
    assert!(raw.iter().all(|(blob,)| oauth_broker::crypto::Sealer::key_id_of(blob).as_deref() == Some(&new)));
    // The webhook signs with the same two secrets, now sealed with the new key.
    let webhook = app.state.core.store.webhooks().by_service(&service).await.unwrap().unwrap();
    let previous = webhook.previous_secret_sealed.as_deref().unwrap();
    for (sealed, secret) in [(webhook.secret_sealed.as_slice(), &second_secret), (previous, &first_secret)] {
        assert_eq!(oauth_broker::crypto::Sealer::key_id_of(sealed).as_deref(), Some(new.as_str()));
        assert_eq!(WebhookSecret::open(&app.state.core.sealer, sealed, &service).unwrap().expose(), secret);
    }

    let dropped = run(app, &["admin", "keys", "drop", &old]);
    assert!(dropped.status.success(), "drop: {}", text(&dropped.stderr));
    assert!(!app.data_dir().join("retired-keys").join(format!("{old}.key")).exists());
    // Start-up without the old key works, and still reads the connection.
    let listed = run(app, &["admin", "grants", "list", "--json"]);
    assert!(listed.status.success(), "a command starts without the old key: {}", text(&listed.stderr));
    assert!(me(&client).await, "the server still serves the connection");
    let server = Serve::start(app).await;
    assert!(server.ready, "serve starts without the old key: {}", server.stderr);
}

/// A service with a webhook whose secret was rotated (the first still in its overlap): the
/// service id, the first secret and the second.
async fn webhook_in_rotation(app: &TestApp) -> (String, String, String) {
    let options = crate::helpers::token_api::ServiceOptions { trusted: true, ..Default::default() };
    let service = crate::helpers::token_api::register_service(app, "notes", &["demo"], options).await.client_id;
    let first = crate::helpers::webhooks::set_webhook(app, &service, "https://hooks.example/notes").await;
    let second = WebhookSecret::generate();
    let sealed = second.seal(&app.state.core.sealer, &service);
    let store = &app.state.core.store;
    assert!(store.webhooks().rotate_secret(&service, &sealed, app.now() + 86_400, app.now()).await.unwrap());
    (service, first, second.expose().to_owned())
}

/// Approves at the broker's consent page and stops before the provider: the authorization
/// now holds a sealed PKCE verifier.
async fn approve_consent_only(app: &TestApp, connect_url: &str, name: &str) {
    let browser = app.browser();
    let path = connect_url.strip_prefix(&app.address).unwrap();
    if browser.get(connect_url).send().await.unwrap().status() == 303 {
        assert_eq!(app.sign_in(&browser, name, path).await.status(), 303);
    }
    let html = browser.get(connect_url).send().await.unwrap().text().await.unwrap();
    let csrf = crate::helpers::hidden_field(&html, "csrf_token").unwrap();
    let approved =
        browser.post(connect_url).form(&[("csrf_token", csrf.as_str()), ("action", "approve")]).send().await.unwrap();
    assert_eq!(approved.status(), 303, "the consent sends the browser to the provider");
}

/// `serve` as a process on a free port, until it answers `/readyz` (or exits).
struct Serve {
    ready: bool,
    stderr: String,
}

impl Serve {
    async fn start(app: &TestApp) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = broker(app)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let http = &reqwest::Client::new();
        // Whichever comes first: ready, or the process gave up.
        let ready = crate::helpers::eventually("serve becomes ready or exits", Duration::from_secs(30), || {
            let exited = child.try_wait().unwrap().is_some();
            async move {
                if exited {
                    return Some(false);
                }
                let readyz = http.get(format!("http://127.0.0.1:{port}/readyz")).send().await;
                readyz.is_ok_and(|r| r.status() == 200).then_some(true)
            }
        })
        .await;
        let _ = child.kill();
        let output = child.wait_with_output().unwrap();
        Self { ready, stderr: text(&output.stderr) }
    }
}

async fn start_up_refuses_while_a_value_needs_a_key_that_is_not_loaded(app: &TestApp) {
    // Arrange: a connection sealed with the first key, then a rotation without a rewrap.
    let _client = app.connected_client(ALICE).await;
    let old = key_in(&status(app), "active")["id"].as_str().unwrap().to_owned();
    assert!(run(app, &["admin", "keys", "rotate"]).status.success());

    // Dropping the retired key is refused while it still seals something.
    let refused = run(app, &["admin", "keys", "drop", &old]);
    assert!(!refused.status.success());
    assert!(text(&refused.stderr).contains("still seals"), "{}", text(&refused.stderr));
    let retired_file = app.data_dir().join("retired-keys").join(format!("{old}.key"));
    assert!(retired_file.exists(), "nothing was deleted");

    // Act: the operator deletes the retired key file by hand anyway.
    let old_key = std::fs::read(&retired_file).unwrap();
    std::fs::remove_file(&retired_file).unwrap();

    // Assert: every command and `serve` refuse, naming the key and what it seals.
    let admin = run(app, &["admin", "grants", "list"]);
    assert!(!admin.status.success(), "an admin command refuses");
    let message = text(&admin.stderr);
    assert!(message.contains(&old) && message.contains("not loaded"), "{message}");
    assert!(message.contains("grant access tokens") && message.contains("grant refresh tokens"), "{message}");
    let server = Serve::start(app).await;
    assert!(!server.ready, "serve refuses to start");
    assert!(server.stderr.contains(&old), "serve names the missing key: {}", server.stderr);

    // Putting the key back makes it start again; nothing was lost or replaced.
    std::fs::write(&retired_file, old_key).unwrap();
    let restored = run(app, &["admin", "grants", "list", "--json"]);
    assert!(restored.status.success(), "{}", text(&restored.stderr));
    let grants: Value = serde_json::from_slice(&restored.stdout).unwrap();
    assert_eq!(grants.as_array().unwrap().len(), 1);
    assert_eq!(key_in(&status(app), "retired")["id"], old.as_str());
}

async fn a_rotated_signing_key_keeps_verifying_old_tokens_until_they_expire(app: &TestApp) {
    // Arrange: a token signed by the first key, with the longest lifetime the CLI allows.
    let issued = run(app, &["admin", "tokens", "issue", ALICE, "--ttl", "366d"]);
    assert!(issued.status.success(), "{}", text(&issued.stderr));
    let old_token = text(&issued.stdout).trim().to_owned();
    let old_kid = app.state.identity.keys.active_kid();

    // Act: rotate the signing key from the CLI.
    let rotated = run(app, &["admin", "keys", "rotate-signing"]);
    assert!(rotated.status.success(), "{}", text(&rotated.stderr));

    // Assert: the running server picks the new key up and serves both public keys.
    let http = &app.http();
    let kids: Vec<String> = crate::helpers::eventually(
        "the server serves the new signing key beside the old one",
        Duration::from_secs(10),
        || async {
            let jwks: Value = http.get(app.url("/.well-known/jwks.json")).send().await.unwrap().json().await.unwrap();
            let kids: Vec<String> =
                jwks["keys"].as_array().unwrap().iter().map(|k| k["kid"].as_str().unwrap().to_owned()).collect();
            let signs_with_new = app.state.identity.keys.active_kid() != old_kid;
            if kids.len() == 2 && signs_with_new {
                Ok(kids)
            } else {
                Err(format!("{kids:?}, signs with new: {signs_with_new}"))
            }
        },
    )
    .await;
    assert_eq!(kids.len(), 2, "the JWKS lists the old and the new key: {kids:?}");
    assert!(kids.contains(&old_kid));
    let new_kid = app.state.identity.keys.active_kid();
    assert_ne!(new_kid, old_kid, "the server signs with the new key");
    let new_token = app.token_for(ALICE).await;
    let header: Value = serde_json::from_slice(
        &base64::Engine::decode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            new_token.split('.').next().unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(header["kid"], new_kid.as_str());
    for (token, which) in [(&old_token, "old"), (&new_token, "new")] {
        let client = app.mcp_client_with_token(token, crate::helpers::ClientKind::Url).await.unwrap();
        assert!(client.call("list_connections", json!({})).await.is_ok(), "the {which} key's token is accepted");
        client.close().await;
    }
    let status = status(app);
    let retired = status["signing_keys"].as_array().unwrap().iter().find(|k| k["kid"] == old_kid.as_str()).unwrap();
    assert_eq!(retired["state"], "retired");

    // Once every token the old key could have signed has expired, it leaves the JWKS at the
    // next reload. (A periodic reload that read the keys before the clock moved may still land
    // after this one: the one after it drops the key.)
    app.clock.advance(367 * 24 * 3600);
    let kids = crate::helpers::eventually("only the new key is left", Duration::from_secs(10), || async {
        oauth_broker::keyring::reload_now(&app.state).await;
        let jwks: Value = http.get(app.url("/.well-known/jwks.json")).send().await.unwrap().json().await.unwrap();
        let kids: Vec<String> =
            jwks["keys"].as_array().unwrap().iter().map(|k| k["kid"].as_str().unwrap().to_owned()).collect();
        if kids == [new_kid.clone()] { Ok(kids) } else { Err(format!("{kids:?}")) }
    })
    .await;
    assert_eq!(kids, vec![new_kid.clone()], "only the new key is left");
}

macro_rules! on_both_backends_with_key_files {
    ($name:ident, $body:ident) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let app = spawn(Backend::Sqlite).await.unwrap();
                $body(&app).await;
                app.stop().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(app) = spawn(Backend::Postgres).await else { return };
                $body(&app).await;
                app.stop().await;
            }
        }
    };
}

on_both_backends_with_key_files!(
    rotate_and_rewrap_online,
    rotate_and_rewrap_while_the_server_serves_then_start_up_without_the_old_key
);
on_both_backends_with_key_files!(missing_key_refuses, start_up_refuses_while_a_value_needs_a_key_that_is_not_loaded);
on_both_backends_with_key_files!(lost_key_forgotten, a_key_lost_for_good_is_forgotten_and_the_broker_starts);

/// The last resort: a retired key deleted with no backup. Start-up's refusal names
/// `admin keys forget`; it lists what the key sealed, changes nothing unless confirmed, then
/// sends those grants through a new consent, deletes what cannot be opened, audits, and the
/// broker starts again.
async fn a_key_lost_for_good_is_forgotten_and_the_broker_starts(app: &TestApp) {
    let _client = app.connected_client(ALICE).await;
    let (service, _, _) = webhook_in_rotation(app).await;
    let old = key_in(&status(app), "active")["id"].as_str().unwrap().to_owned();
    assert!(run(app, &["admin", "keys", "rotate"]).status.success());
    std::fs::remove_file(app.data_dir().join("retired-keys").join(format!("{old}.key"))).unwrap();

    let refused = Serve::start(app).await;
    assert!(!refused.ready, "serve refuses while the key is missing");
    assert!(refused.stderr.contains(&format!("oauth-broker admin keys forget {old}")), "{}", refused.stderr);

    let forget = |answer: &str, extra: &[&str]| {
        use std::io::Write;
        let mut child = broker(app)
            .args(["admin", "keys", "forget", &old])
            .args(extra)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(answer.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let declined = forget("no\n", &[]);
    assert!(!declined.status.success(), "not confirmed");
    let listed = text(&declined.stdout);
    assert!(
        listed.contains("grant access tokens")
            && listed.contains("JWT signing keys")
            && listed.contains("webhook signing secrets of services"),
        "lists what it sealed: {listed}"
    );
    assert!(!Serve::start(app).await.ready, "nothing was changed");

    let forgotten = forget("", &["--yes"]);
    assert!(forgotten.status.success(), "{}", text(&forgotten.stderr));
    assert!(text(&forgotten.stdout).contains("1 grant(s) need a new consent"), "{}", text(&forgotten.stdout));
    assert!(text(&forgotten.stdout).contains("1 webhook(s) removed"), "{}", text(&forgotten.stdout));
    assert!(
        app.state.core.store.webhooks().by_service(&service).await.unwrap().is_none(),
        "the webhook it could not sign for is gone"
    );
    let grants = run(app, &["admin", "grants", "list", "--json"]);
    assert!(grants.status.success(), "{}", text(&grants.stderr));
    let grants: Value = serde_json::from_slice(&grants.stdout).unwrap();
    assert_eq!(grants[0]["status"], "needs_reconsent", "{grants}");
    let audit = text(&run(app, &["admin", "audit", "--limit", "5"]).stdout);
    assert!(audit.contains("key.forgotten") && audit.contains(&old), "{audit}");
    let started = Serve::start(app).await;
    assert!(started.ready, "the broker starts: {}", started.stderr);
}
on_both_backends_with_key_files!(signing_rotation, a_rotated_signing_key_keeps_verifying_old_tokens_until_they_expire);
