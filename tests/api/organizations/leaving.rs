//! What a service learns of people outside its organization, besides the token API's answers:
//! its webhook hears nothing of them, and a member who leaves takes with them what the
//! organization's services had of them — a link sent before cannot be finished for them, and
//! their consents to those services go (rejoining asks again).

use std::time::Duration;

use oauth_broker::domain::{OrgRole, OrgSlug};
use oauth_broker::store::webhooks::DeliveryStatus;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::token_api::{ServiceCredentials, ServiceOptions, register_service};
use crate::helpers::webhooks::{Receiver, WEBHOOK_TOML, set_webhook};
use crate::helpers::*;

async fn spawn(backend: Backend) -> Option<TestApp> {
    spawn_app_opts(backend, SpawnOptions { toml: WEBHOOK_TOML.into(), ..Default::default() }, |b| b).await
}

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

fn slug(text: &str) -> OrgSlug {
    OrgSlug::parse(text).unwrap()
}

async fn ask(app: &TestApp, service: &ServiceCredentials, user: &str) -> (StatusCode, Value) {
    let response = app
        .http()
        .post(app.url("/v1/tokens"))
        .basic_auth(&service.client_id, Some(&service.secret))
        .json(&json!({"user_id": user, "provider": "demo"}))
        .send()
        .await
        .unwrap();
    (response.status(), response.json().await.unwrap_or(Value::Null))
}

async fn settled(app: &TestApp) {
    eventually("no delivery is pending", Duration::from_secs(30), || async {
        app.state.core.store.webhook_events().list(None, Some(DeliveryStatus::Pending), 10).await.unwrap().is_empty()
    })
    .await;
}

async fn hook(app: &TestApp, name: &str, org: &oauth_broker::domain::OrganizationId) -> (ServiceCredentials, Receiver) {
    let receiver = Receiver::start().await;
    let service =
        register_service(app, name, &["demo"], ServiceOptions { trusted: true, org: Some(org), ..Default::default() })
            .await;
    let secret = set_webhook(app, &service.client_id, &receiver.url).await;
    receiver.trust(&[&secret]);
    (service, receiver)
}

/// Bob is only in globex; acme and globex both have a service with a webhook for `demo`. Bob
/// connects through his MCP client: globex's webhook hears of it, acme's of nothing.
async fn a_webhook_hears_nothing_of_another_organizations_user(app: &TestApp) {
    let store = &app.state.core.store;
    let now = app.now();
    let acme = store.organizations().create(&slug("acme"), "Acme", now).await.unwrap();
    let globex = store.organizations().create(&slug("globex"), "Globex", now).await.unwrap();
    let default = store.organizations().default_organization().await.unwrap();
    let bob = app.user_id(BOB).await;
    store.in_org(&globex.id).members().add(&bob, OrgRole::Member, now).await.unwrap();
    assert!(store.in_org(&default.id).members().remove(&bob, now).await.unwrap());
    let (_acme_hook, acme_heard) = hook(app, "acme-hook", &acme.id).await;
    let (_globex_hook, globex_heard) = hook(app, "globex-hook", &globex.id).await;

    let _client = app.connected_client(BOB).await;
    eventually("globex's webhook hears of its member's connection", Duration::from_secs(30), || async {
        globex_heard.received().iter().any(|r| r.body["data"]["user_id"] == bob.as_str())
    })
    .await;
    settled(app).await;
    let heard: Vec<_> = acme_heard.received().into_iter().map(|r| r.raw).collect();
    assert!(heard.is_empty(), "acme's webhook heard of globex's bob: {heard:?}");
}
on_both_with_webhooks!(webhook_per_org, a_webhook_hears_nothing_of_another_organizations_user);

/// Alice is in acme; acme's service asks for her token and gets a link; she leaves acme before
/// finishing it. The link no longer works, acme's service sees it failed (never completed),
/// hears nothing by webhook after she left, and no consent of hers to it is kept.
async fn a_member_who_leaves_cannot_finish_a_link_for_the_organizations_service(app: &TestApp) {
    let store = &app.state.core.store;
    let now = app.now();
    let acme = store.organizations().create(&slug("acme"), "Acme", now).await.unwrap();
    let alice = app.user_id(ALICE).await;
    store.in_org(&acme.id).members().add(&alice, OrgRole::Member, now).await.unwrap();
    let (back, receiver) = hook(app, "acme-back", &acme.id).await;

    // A consent she gave before, and a link she has not finished yet.
    let (status, problem) = ask(app, &back, &alice).await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    app.approve_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;
    assert_eq!(ask(app, &back, &alice).await.0, StatusCode::OK);
    let consents = || async {
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM client_consents WHERE client_key = $1")
            .bind(format!("service:{}", back.client_id))
            .fetch_one(store.pool())
            .await
            .unwrap();
        n
    };
    assert_eq!(consents().await, 1);
    app.state.core.store.grants().delete_all_at("demo").await.unwrap();
    let (status, problem) = ask(app, &back, &alice).await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    let id = problem["authorization"]["id"].as_str().unwrap().to_owned();
    let url = problem["authorization"]["url"].as_str().unwrap().to_owned();
    settled(app).await;
    let heard_before = receiver.received().len();

    admin_leave(app, "acme", ALICE).await;
    // Another process made the change: this server hears of it within its watcher's interval.
    eventually("refused as nobody once she left", Duration::from_secs(30), || async {
        ask(app, &back, &alice).await.0 == StatusCode::BAD_REQUEST
    })
    .await;
    assert_eq!(consents().await, 0, "her consent to acme's service went with her");

    let browser = app.browser();
    app.sign_in(&browser, ALICE, url.strip_prefix(&app.address).unwrap()).await;
    let page = browser.get(&url).send().await.unwrap();
    assert_ne!(page.status(), StatusCode::OK, "the link no longer works");
    let response = app
        .http()
        .get(app.url(&format!("/v1/authorizations/{id}")))
        .basic_auth(&back.client_id, Some(&back.secret))
        .send()
        .await
        .unwrap();
    let body = response.text().await.unwrap();
    assert!(!body.contains("\"completed\""), "{body}");
    settled(app).await;
    let after: Vec<_> = receiver.received().into_iter().skip(heard_before).map(|r| r.raw).collect();
    assert!(after.iter().all(|raw| !raw.contains(&alice)), "acme's webhook heard of her after she left: {after:?}");
}
on_both_with_webhooks!(leaving_mid_flight, a_member_who_leaves_cannot_finish_a_link_for_the_organizations_service);

/// As an operator does it: `admin orgs leave`, its own process.
async fn admin_leave(app: &TestApp, org: &str, user: &str) {
    crate::helpers::cli::admin_elsewhere(app, &["orgs", "leave", org, user]).await;
}
