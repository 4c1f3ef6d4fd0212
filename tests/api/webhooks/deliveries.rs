//! Webhooks for services (issue 27), end to end: the changes are driven through the real flows
//! (MCP connect, the token API, the browser's consent page, the strict provider's refresh, the
//! admin CLI), and a real HTTP receiver ([`Receiver`]) verifies every delivery's signature with
//! the secret it was given. Time moves by the injected clock, never by sleeping.

use std::collections::HashSet;
use std::process::{Command, Output};
use std::time::Duration;

use oauth_broker::store::webhooks::{DeliveryRow, DeliveryStatus};
use reqwest::StatusCode;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use crate::helpers::token_api::{ServiceCredentials, ServiceOptions, register_service};
use crate::helpers::webhooks::{Receiver, WEBHOOK_TOML, service_with_webhook, verify, verify_any};
use crate::helpers::*;
use oauth_broker::store::grants::{Grants, NewGrant};

pub async fn spawn(backend: Backend) -> Option<TestApp> {
    spawn_app_opts(backend, SpawnOptions { toml: WEBHOOK_TOML.into(), ..Default::default() }, |b| b).await
}

/// `on_both_backends!` with [`spawn`]'s settings.
macro_rules! on_both_with_webhooks {
    ($name:ident, $body:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let app = super::spawn(crate::helpers::Backend::Sqlite).await.unwrap();
                super::$body(&app).await;
                app.stop().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(app) = super::spawn(crate::helpers::Backend::Postgres).await else { return };
                super::$body(&app).await;
                app.stop().await;
            }
        }
    };
}

/// The service asks for `user`'s demo token (`POST /v1/tokens`, naming the user).
async fn ask(app: &TestApp, service: &ServiceCredentials, user: &str, scopes: &[&str]) -> (StatusCode, Value) {
    let response = app
        .http()
        .post(app.url("/v1/tokens"))
        .basic_auth(&service.client_id, Some(&service.secret))
        .json(&json!({"user_id": user, "provider": "demo", "scopes": scopes}))
        .send()
        .await
        .unwrap();
    (response.status(), response.json().await.unwrap_or(Value::Null))
}

/// The admin CLI on the app's database and key (the demo provider configured).
pub fn admin(app: &TestApp, args: &[&str]) -> Output {
    let config = &app.state.core.config;
    let mut command = Command::new(binary());
    command.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
    command
        .env("OAUTH_BROKER_DATA_DIR", &config.data_dir)
        .env("OAUTH_BROKER_PUBLIC_URL", config.public_url.as_str())
        .env("OAUTH_BROKER_DATABASE_URL", &config.database_url)
        .env("OAUTH_BROKER_ENCRYPTION_KEY", config.encryption_key.as_ref().unwrap().expose_secret())
        .env("OAUTH_BROKER_DEMO", "true")
        .arg("admin")
        .args(args);
    command.output().unwrap()
}

fn succeeded(output: &Output) -> String {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn refused(output: &Output, message: &str) {
    assert!(!output.status.success(), "should fail: {}", String::from_utf8_lossy(&output.stdout));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(message), "expected {message:?} in {stderr}");
}

async fn deliveries(app: &TestApp) -> Vec<DeliveryRow> {
    let mut rows = app.state.core.store.webhook_events().list(None, None, 1000).await.unwrap();
    rows.reverse();
    rows
}

async fn all_settled(app: &TestApp) {
    eventually("no delivery is pending", Duration::from_secs(30), || async {
        let pending =
            app.state.core.store.webhook_events().list(None, Some(DeliveryStatus::Pending), 10).await.unwrap();
        pending.is_empty()
    })
    .await;
}

fn types(received: &[crate::helpers::webhooks::Received]) -> Vec<String> {
    received.iter().map(|r| r.event_type().to_owned()).collect()
}

/// Only names, ids, scopes and times: no token of any kind.
fn carries_no_token(raw: &str) {
    let body: Value = serde_json::from_str(raw).unwrap();
    let keys: Vec<&String> = body["data"].as_object().unwrap().keys().collect();
    assert!(keys.iter().all(|k| !k.contains("token")), "{raw}");
}

async fn each_connection_change_reaches_the_webhook_once_signed(app: &TestApp) {
    let receiver = Receiver::start().await;
    let (service, _) = service_with_webhook(app, "notes", &["demo"], &receiver).await;
    let alice = app.user_id(ALICE).await;

    // Created: alice connects through an MCP client.
    let client = app.connected_client(ALICE).await;
    let got = receiver.wait_for(1).await;
    assert_eq!(got[0].event_type(), "connection.created");
    let data = &got[0].body["data"];
    assert_eq!((data["user_id"].as_str(), data["provider"].as_str()), (Some(alice.as_str()), Some("demo")));
    assert_eq!(data["account"], "demo-user");
    assert!(data["scopes"].as_array().unwrap().contains(&json!("profile")), "{data}");
    assert_eq!(got[0].body["id"], got[0].id.as_str(), "the body names the webhook-id");

    // Updated, and the authorization the service caused completed: it asks for more scopes.
    let (status, problem) = ask(app, &service, &alice, &["profile", "notes:write"]).await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    let authorization = problem["authorization"]["id"].as_str().unwrap().to_owned();
    app.approve_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;
    let got = receiver.wait_for(3).await;
    assert_eq!(got[1].event_type(), "connection.updated");
    assert!(got[1].body["data"]["scopes"].as_array().unwrap().contains(&json!("notes:write")));
    assert!(!got[1].body["data"]["previous_scopes"].as_array().unwrap().contains(&json!("notes:write")));
    assert_eq!(got[2].event_type(), "authorization.completed");
    assert_eq!(got[2].body["data"]["authorization_id"], authorization.as_str());

    // Revoked by the user on the connections page, then (connected again) by an operator.
    let browser = app.browser();
    app.sign_in(&browser, ALICE, "/").await;
    let page = browser.get(app.url("/connections")).send().await.unwrap().text().await.unwrap();
    let form = [
        ("csrf_token", hidden_field(&page, "csrf_token").unwrap()),
        ("grant_id", hidden_field(&page, "grant_id").unwrap()),
    ];
    assert_eq!(browser.post(app.url("/connections/revoke")).form(&form).send().await.unwrap().status(), 303);
    let got = receiver.wait_for(4).await;
    assert_eq!((got[3].event_type(), got[3].body["data"]["by"].as_str()), ("connection.revoked", Some("user")));
    let again = app.connected_client(ALICE).await;
    receiver.wait_for(5).await;
    succeeded(&admin(app, &["grants", "revoke", ALICE, "demo"]));
    // The CLI wrote the event at the machine's time, which the app's fixed clock has not reached.
    app.clock.advance(60);
    let got = receiver.wait_for(6).await;
    assert_eq!((got[5].event_type(), got[5].body["data"]["by"].as_str()), ("connection.revoked", Some("admin")));

    // Once per change: nothing else is pending, every delivery verified, every id distinct.
    all_settled(app).await;
    let got = receiver.received();
    assert_eq!(
        types(&got),
        [
            "connection.created",
            "connection.updated",
            "authorization.completed",
            "connection.revoked",
            "connection.created",
            "connection.revoked"
        ]
    );
    assert_eq!(got.iter().map(|r| r.id.as_str()).collect::<HashSet<_>>().len(), 6);
    assert_eq!(receiver.unverified(), 0);
    for delivery in &got {
        carries_no_token(&delivery.raw);
    }
    client.close().await;
    again.close().await;
    receiver.stop();
}
on_both_with_webhooks!(connection_events_reach_the_webhook, each_connection_change_reaches_the_webhook_once_signed);

async fn a_declined_and_an_expired_authorization_of_the_service_reach_its_webhook(app: &TestApp) {
    let receiver = Receiver::start().await;
    let (service, _) = service_with_webhook(app, "notes", &["demo"], &receiver).await;
    let alice = app.user_id(ALICE).await;

    // Declined on the consent page.
    let (_, problem) = ask(app, &service, &alice, &["profile"]).await;
    let (declined_id, url) = (
        problem["authorization"]["id"].as_str().unwrap().to_owned(),
        problem["authorization"]["url"].as_str().unwrap().to_owned(),
    );
    let browser = app.browser();
    app.sign_in(&browser, ALICE, url.strip_prefix(&app.address).unwrap()).await;
    let page = browser.get(&url).send().await.unwrap().text().await.unwrap();
    let csrf = hidden_field(&page, "csrf_token").unwrap();
    let declined = browser.post(&url).form(&[("csrf_token", csrf.as_str()), ("action", "deny")]).send().await.unwrap();
    assert_eq!(declined.status(), 200);
    let got = receiver.wait_for(1).await;
    assert_eq!(got[0].event_type(), "authorization.declined");
    assert_eq!(got[0].body["data"]["authorization_id"], declined_id.as_str());

    // Left to expire.
    let (_, problem) = ask(app, &service, &alice, &["profile"]).await;
    let expired_id = problem["authorization"]["id"].as_str().unwrap().to_owned();
    assert_ne!(expired_id, declined_id);
    app.clock.advance(app.state.core.config.authorization_ttl.as_secs() as i64 + 1);
    let got = receiver.wait_for(2).await;
    assert_eq!(got[1].event_type(), "authorization.expired");
    assert_eq!(got[1].body["data"]["authorization_id"], expired_id.as_str());

    // Once: later sweeps do not write it again.
    app.clock.advance(60);
    all_settled(app).await;
    assert_eq!(deliveries(app).await.len(), 2);
    receiver.stop();
}
on_both_with_webhooks!(
    authorization_events_reach_the_webhook,
    a_declined_and_an_expired_authorization_of_the_service_reach_its_webhook
);

async fn a_receiver_that_was_down_gets_every_event_after_it_comes_back_in_order(app: &TestApp) {
    let receiver = Receiver::start().await;
    service_with_webhook(app, "notes", &["demo"], &receiver).await;
    receiver.answer(503);

    // Three changes of one connection while the receiver is down.
    let client = app.connected_client(ALICE).await;
    client.call("disconnect_account", json!({"provider": "demo"})).await.unwrap();
    let again = app.connected_client(ALICE).await;
    eventually("the first event was tried and failed", Duration::from_secs(30), || async {
        let rows = deliveries(app).await;
        rows.len() == 3 && rows[0].attempts >= 1
    })
    .await;
    let rows = deliveries(app).await;
    assert_eq!(rows[1].attempts, 0, "a later event of the connection waits for the earlier one");
    assert!(receiver.received().is_empty());

    // Back: after the backoff every event arrives, in the order of the changes.
    receiver.answer(200);
    app.clock.advance(3600);
    let got = receiver.wait_for(3).await;
    assert_eq!(types(&got), ["connection.created", "connection.revoked", "connection.created"]);
    assert_eq!(
        got.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
        rows.iter().map(|r| r.event_id.clone()).collect::<Vec<_>>()
    );
    client.close().await;
    again.close().await;
    receiver.stop();
}
on_both_with_webhooks!(receiver_down_then_back, a_receiver_that_was_down_gets_every_event_after_it_comes_back_in_order);

async fn an_event_nobody_accepts_ends_in_the_dead_letters_and_can_be_sent_again(app: &TestApp) {
    let receiver = Receiver::start().await;
    service_with_webhook(app, "notes", &["demo"], &receiver).await;
    receiver.answer(503);
    let client = app.connected_client(ALICE).await;
    eventually("the event was tried", Duration::from_secs(30), || async {
        deliveries(app).await.first().is_some_and(|row| row.attempts >= 1)
    })
    .await;

    // The retry window (2 h here) passes: the next failed attempt is the last.
    app.clock.advance(2 * 3600 + 1);
    let dead = eventually("the event is dead-lettered", Duration::from_secs(30), || async {
        deliveries(app).await.into_iter().find(|row| row.status == DeliveryStatus::Dead)
    })
    .await;
    assert!(dead.last_error.as_deref().unwrap().contains("503"), "{dead:?}");
    assert!(receiver.received().is_empty());
    let listed = succeeded(&admin(app, &["webhooks", "list", "--status", "dead", "--json"]));
    assert!(listed.contains(&dead.event_id), "{listed}");

    // The operator sends it again once the receiver is back: the same id arrives.
    receiver.answer(200);
    succeeded(&admin(app, &["webhooks", "resend", &dead.event_id]));
    let got = receiver.wait_for(1).await;
    assert_eq!(got[0].id, dead.event_id);
    refused(&admin(app, &["webhooks", "resend", "evt_nope"]), "no delivered or dead event");
    client.close().await;
    receiver.stop();
}
on_both_with_webhooks!(dead_letters, an_event_nobody_accepts_ends_in_the_dead_letters_and_can_be_sent_again);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_a_rotation_both_secrets_sign_and_a_tampered_delivery_fails_verification() {
    let app = spawn(Backend::Sqlite).await.unwrap();
    let receiver = Receiver::start().await;
    let (_, old) = service_with_webhook(&app, "notes", &["demo"], &receiver).await;
    let client = app.connected_client(ALICE).await;
    let first = receiver.wait_for(1).await.remove(0);
    assert_eq!(first.signatures.len(), 1);

    // The operator rotates: the new secret is printed once; the old one still signs.
    let printed = succeeded(&admin(&app, &["services", "rotate-webhook-secret", "notes", "--json"]));
    let new = serde_json::from_str::<Value>(&printed).unwrap()["signing_secret"].as_str().unwrap().to_owned();
    assert!(new.starts_with("whsec_") && new != old);
    receiver.trust(&[&new]);
    client.call("disconnect_account", json!({"provider": "demo"})).await.unwrap();
    let during = receiver.wait_for(2).await.remove(1);
    assert_eq!(during.signatures.len(), 2, "both signatures during the overlap");
    let (id, ts, body) = (during.id.as_str(), during.timestamp, during.raw.as_str());
    assert!(during.signatures.iter().any(|s| verify(&new, id, ts, body, s)));
    assert!(during.signatures.iter().any(|s| verify(&old, id, ts, body, s)));

    // After the overlap only the new one signs.
    app.clock.advance(25 * 3600);
    let again = app.connected_client(ALICE).await;
    let after = receiver.wait_for(3).await.remove(2);
    assert_eq!(after.signatures.len(), 1);
    assert!(verify_any(std::slice::from_ref(&new), &after.id, after.timestamp, &after.raw, &after.signatures));
    assert!(!verify_any(std::slice::from_ref(&old), &after.id, after.timestamp, &after.raw, &after.signatures));

    // Tampering with anything signed breaks the signature.
    let sigs = &after.signatures;
    let secrets = [new.clone()];
    assert!(!verify_any(&secrets, &after.id, after.timestamp, &after.raw.replace("demo", "evil"), sigs));
    assert!(!verify_any(&secrets, "evt_other", after.timestamp, &after.raw, sigs));
    assert!(!verify_any(&secrets, &after.id, after.timestamp + 1, &after.raw, sigs));
    let mut flipped = sigs[0].clone().into_bytes();
    let last = flipped.len() - 2;
    flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
    let flipped = String::from_utf8(flipped).unwrap();
    assert!(!verify_any(&secrets, &after.id, after.timestamp, &after.raw, &[flipped]));
    // And the receiver refuses a forged delivery.
    let forged = app
        .http()
        .post(&receiver.url)
        .header("webhook-id", &after.id)
        .header("webhook-timestamp", after.timestamp.to_string())
        .header("webhook-signature", &sigs[0])
        .body(after.raw.replace("demo-user", "mallory"))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    assert_eq!(receiver.received().len(), 3);
    client.close().await;
    again.close().await;
    receiver.stop();
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_answering_410_disables_its_webhook_and_the_operator_sees_why() {
    let app = spawn(Backend::Sqlite).await.unwrap();
    let receiver = Receiver::start().await;
    service_with_webhook(&app, "notes", &["demo"], &receiver).await;
    receiver.answer(410);
    let client = app.connected_client(ALICE).await;
    let dead = eventually("the event is dead", Duration::from_secs(30), || async {
        deliveries(&app).await.into_iter().find(|row| row.status == DeliveryStatus::Dead)
    })
    .await;
    assert!(dead.last_error.unwrap().contains("410"));
    let webhook = app.state.core.store.webhooks().by_service("svc_notes").await.unwrap().unwrap();
    assert!(webhook.disabled_at.is_some());
    // The delivery task audits it; waited for, not assumed to be there with the dead row.
    eventually("the disabled webhook is audited", Duration::from_secs(10), || async {
        let audit = app.state.core.store.audit().entries(None, 50).await.unwrap();
        let actions: Vec<String> = audit.iter().map(|e| e.action.clone()).collect();
        if actions.iter().any(|a| a == "webhook.disabled") { Ok(()) } else { Err(format!("{actions:?}")) }
    })
    .await;
    // A disabled webhook gets no new events.
    client.call("disconnect_account", json!({"provider": "demo"})).await.unwrap();
    assert_eq!(deliveries(&app).await.len(), 1);
    client.close().await;
    receiver.stop();
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_operators_allowance_a_loopback_endpoint_is_never_called() {
    // The default settings: public https endpoints only.
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let receiver = Receiver::start().await;
    // Stored as a hand-edited database would hold it (the CLI refuses it, see below).
    service_with_webhook(&app, "notes", &["demo"], &receiver).await;
    let client = app.connected_client(ALICE).await;
    let tried = eventually("the delivery was refused before any request", Duration::from_secs(30), || async {
        deliveries(&app).await.into_iter().find(|row| row.attempts >= 1)
    })
    .await;
    assert!(tried.last_error.unwrap().contains("must use https"));
    assert_eq!(receiver.attempts(), 0, "no request reached the loopback receiver");
    client.close().await;
    receiver.stop();
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_commands_refuse_bad_values_in_the_operators_words_and_show_the_secret_once() {
    let app = spawn(Backend::Sqlite).await.unwrap();
    register_service(&app, "notes", &["demo"], ServiceOptions::default()).await;
    for (url, message) in [
        ("http://hooks.example.com/x", "must use https"),
        ("https://127.0.0.1/x", "loopback, private or reserved"),
        ("https://169.254.169.254/latest/meta-data", "loopback, private or reserved"),
        ("https://localhost/x", "loopback, private or reserved"),
        ("hooks", "is not an absolute URL"),
    ] {
        refused(&admin(&app, &["services", "set-webhook", "notes", "--url", url]), message);
    }
    refused(
        &admin(&app, &["services", "set-webhook", "nope", "--url", "https://hooks.example.com/x"]),
        "no service named nope",
    );
    refused(&admin(&app, &["services", "rotate-webhook-secret", "notes"]), "has no webhook");
    assert!(app.state.core.store.webhooks().by_service("svc_notes").await.unwrap().is_none(), "nothing was written");

    let printed = succeeded(&admin(
        &app,
        &["services", "set-webhook", "notes", "--url", "https://hooks.example.com/b", "--json"],
    ));
    let secret = serde_json::from_str::<Value>(&printed).unwrap()["signing_secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"));
    let stored = app.state.core.store.webhooks().by_service("svc_notes").await.unwrap().unwrap();
    assert!(!String::from_utf8_lossy(&stored.secret_sealed).contains(&secret[6..]), "stored sealed");
    let audit = app.state.core.store.audit().entries(None, 50).await.unwrap();
    let set = audit.iter().find(|e| e.action == "admin.webhook_set").expect("audited");
    assert!(!set.detail.as_deref().unwrap_or_default().contains(&secret[6..]), "never the secret");

    refused(&admin(&app, &["webhooks", "list", "--status", "sent"]), "--status must be pending, delivered or dead");
    refused(&admin(&app, &["webhooks", "list", "--service", "nope"]), "no service named nope");
    succeeded(&admin(&app, &["services", "remove-webhook", "notes"]));
    refused(&admin(&app, &["services", "remove-webhook", "notes"]), "has no webhook");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_never_both_deliver_the_same_attempt() {
    let Some(first) = spawn(Backend::Postgres).await else { return };
    let options = SpawnOptions { toml: WEBHOOK_TOML.into(), instance_of: Some(first.instance()), ..Default::default() };
    let second = spawn_app_opts(Backend::Postgres, options, |b| b).await.unwrap();
    let receiver = Receiver::start().await;
    service_with_webhook(&first, "notes", &["demo"], &receiver).await;
    receiver.answer(503);

    // Changes on both instances while the receiver is down; both instances try.
    let alice = first.connected_client(ALICE).await;
    let bob = first.connected_client(BOB).await;
    alice.call("disconnect_account", json!({"provider": "demo"})).await.unwrap();
    // Bob disconnects through the other instance (it shares the first's public URL).
    let bob_there = second.mcp_client(BOB, ClientKind::Url).await;
    bob_there.call("disconnect_account", json!({"provider": "demo"})).await.unwrap();
    eventually("both connections' first events were tried", Duration::from_secs(30), || async {
        deliveries(&first).await.iter().filter(|row| row.attempts >= 1).count() == 2
    })
    .await;
    receiver.answer(200);
    first.clock.advance(3600);
    second.clock.advance(3600);
    let got = receiver.wait_for(4).await;
    all_settled(&first).await;

    // Each event once, and every attempt the receiver saw is one the outbox counted.
    let ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 4, "{ids:?}");
    let counted: i64 = deliveries(&first).await.iter().map(|row| row.attempts).sum();
    assert_eq!(receiver.attempts() as i64, counted, "no attempt was made twice");
    alice.close().await;
    bob.close().await;
    bob_there.close().await;
    receiver.stop();
    second.stop().await;
    first.stop().await;
}

/// Change → receiver latency over a few hundred events (`cargo test --test api webhook_latency
/// -- --ignored --nocapture`): each change is a grant stored through the store call the core
/// makes, with its event. All are one user's at one provider, so they are delivered strictly one
/// after the other (in order per connection): the worst case for a burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check"]
async fn webhook_latency_sqlite() {
    webhook_latency(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check"]
async fn webhook_latency_postgres() {
    webhook_latency(Backend::Postgres).await;
}

async fn webhook_latency(backend: Backend) {
    {
        let Some(app) = spawn(backend).await else { return };
        let receiver = Receiver::start().await;
        service_with_webhook(&app, "notes", &["demo"], &receiver).await;
        let user = app.user_id(ALICE).await;
        let scopes = oauth_broker::domain::Scopes::from_space_separated("profile").unwrap();
        let tokens = oauth_broker::store::grants::SealedTokens {
            access_token_sealed: vec![1],
            refresh_token_sealed: None,
            key_id: "k".into(),
            expires_at: None,
            scopes: scopes.clone(),
        };
        const N: usize = 300;
        let mut started = Vec::with_capacity(N);
        for i in 0..N {
            let account = format!("account-{i}");
            let id = Grants::id_for(&user, "demo", &account);
            let event =
                oauth_broker::broker::connection_events::stored(None, &id, &user, "demo", Some(&account), &scopes);
            let at = std::time::Instant::now();
            assert!(
                app.state
                    .core
                    .store
                    .grants()
                    .upsert(
                        &NewGrant {
                            id: &id,
                            user_id: &user,
                            provider: "demo",
                            account_label: Some(&account),
                            tokens: &tokens,
                            organization: &oauth_broker::domain::OrganizationId::default_organization(),
                            app_id: None,
                        },
                        app.now()
                    )
                    .noting(event.as_ref(), app.now())
                    .await
                    .unwrap()
            );
            started.push((account, at));
            // One change every 5 ms, like a busy broker, not one burst.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let got = receiver.wait_for(N).await;
        let mut latencies: Vec<Duration> = got
            .iter()
            .map(|r| {
                let account = r.body["data"]["account"].as_str().unwrap();
                let (_, at) = started.iter().find(|(a, _)| a == account).unwrap();
                r.at.duration_since(*at)
            })
            .collect();
        latencies.sort();
        let p = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize];
        println!(
            "{backend:?}: {N} events, change → receiver p50 {:?}, p90 {:?}, p99 {:?}, max {:?}",
            p(0.5),
            p(0.9),
            p(0.99),
            p(1.0)
        );
        receiver.stop();
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_page_lists_dead_letters_and_sends_one_again_with_its_csrf_token() {
    let app = spawn(Backend::Sqlite).await.unwrap();
    let receiver = Receiver::start().await;
    service_with_webhook(&app, "notes", &["demo"], &receiver).await;
    receiver.answer(503);
    let client = app.connected_client(ALICE).await;
    eventually("the event was tried", Duration::from_secs(30), || async {
        deliveries(&app).await.first().is_some_and(|row| row.attempts >= 1)
    })
    .await;
    app.clock.advance(2 * 3600 + 1);
    let dead = eventually("the event is dead-lettered", Duration::from_secs(30), || async {
        deliveries(&app).await.into_iter().find(|row| row.status == DeliveryStatus::Dead)
    })
    .await;

    let admin = crate::helpers::admin::admin_browser(&app).await;
    let html = admin.get(app.url("/admin/webhooks")).send().await.unwrap().text().await.unwrap();
    assert!(html.contains(&dead.event_id) && html.contains("dead") && html.contains("Send again"), "{html}");
    let csrf = hidden_field(&html, "csrf_token").unwrap();
    receiver.answer(200);
    // A forged post (no token) changes nothing.
    let forged = admin
        .post(app.url("/admin/webhooks/resend"))
        .form(&[("event_id", dead.event_id.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    let resend = admin
        .post(app.url("/admin/webhooks/resend"))
        .form(&[("csrf_token", csrf.as_str()), ("event_id", dead.event_id.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(location(&resend), "/admin/webhooks?notice=resent");
    assert_eq!(receiver.wait_for(1).await[0].id, dead.event_id);
    let audit = app.state.core.store.audit().entries(None, 50).await.unwrap();
    assert!(audit.iter().any(|e| e.action == "admin.webhook_resent"));
    client.close().await;
    receiver.stop();
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consent_only_authorization_the_service_caused_reports_its_completion() {
    let app = spawn(Backend::Sqlite).await.unwrap();
    let receiver = Receiver::start().await;
    // Alice is connected through an MCP client before the service has a webhook.
    let client = app.connected_client(ALICE).await;
    let (service, _) = service_with_webhook(&app, "notes", &["demo"], &receiver).await;
    let alice = app.user_id(ALICE).await;

    let (status, problem) = ask(&app, &service, &alice, &["profile"]).await;
    assert_eq!((status, problem["reason"].as_str()), (StatusCode::CONFLICT, Some("consent_required")), "{problem}");
    let id = problem["authorization"]["id"].as_str().unwrap().to_owned();
    app.allow_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;

    let got = receiver.wait_for(1).await;
    assert_eq!(got[0].event_type(), "authorization.completed");
    assert_eq!(got[0].body["data"]["authorization_id"], id.as_str());
    all_settled(&app).await;
    assert_eq!(receiver.received().len(), 1, "allowing a client changes no connection");
    client.close().await;
    receiver.stop();
    app.stop().await;
}
