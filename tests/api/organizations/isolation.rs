//! A service belongs to one organization and acts only for that organization's members. Alice is
//! in acme, Bob in globex (neither in the default organization any more); each organization has
//! a service that takes users' tokens and a trusted one that names users by id. Every path of the
//! token API is tried by globex's services against Alice, who is connected and whom acme's
//! services serve: each is refused exactly as a user who does not exist (or a token that is not
//! for the service) is, byte for byte, and nothing is written or asked of the provider.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::token_api::{ServiceCredentials, ServiceOptions, register_service, user_token_for};
use crate::helpers::*;
use crate::on_both_backends;

const ACME_RESOURCE: &str = "https://acme.example/mcp";
const GLOBEX_RESOURCE: &str = "https://globex.example/mcp";

/// An answer as a service sees it: status and body, whole.
type Seen = (StatusCode, String);

async fn seen(response: reqwest::Response) -> Seen {
    let status = response.status();
    (status, response.text().await.unwrap())
}

async fn tokens(app: &TestApp, service: &ServiceCredentials, body: Value) -> (StatusCode, String) {
    seen(
        app.http()
            .post(app.url("/v1/tokens"))
            .basic_auth(&service.client_id, Some(&service.secret))
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn proxy(app: &TestApp, service: &ServiceCredentials, header: (&str, &str)) -> (StatusCode, String) {
    seen(
        app.http()
            .get(app.url("/v1/proxy/demo/me"))
            .basic_auth(&service.client_id, Some(&service.secret))
            .header(header.0, header.1)
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn connections(app: &TestApp, service: &ServiceCredentials, header: (&str, &str)) -> (StatusCode, String) {
    seen(
        app.http()
            .get(app.url("/v1/connections"))
            .basic_auth(&service.client_id, Some(&service.secret))
            .header(header.0, header.1)
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn exchange(app: &TestApp, service: &ServiceCredentials, subject: &str) -> (StatusCode, String) {
    let form = [
        ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"),
        ("subject_token", subject),
        ("subject_token_type", "urn:ietf:params:oauth:token-type:access_token"),
        ("provider", "demo"),
    ];
    seen(
        app.http()
            .post(app.url("/token"))
            .basic_auth(&service.client_id, Some(&service.secret))
            .form(&form)
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// What a refused request must leave as it was: every connect attempt, grant, consent and token
/// the demo provider issued.
async fn snapshot(app: &TestApp) -> Vec<i64> {
    let mut counts = Vec::new();
    for table in ["authorizations", "grants", "client_consents", "demo_tokens", "demo_codes"] {
        let (n,): (i64,) = sqlx::query_as(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(app.state.core.store.pool())
            .await
            .unwrap();
        counts.push(n);
    }
    counts
}

async fn a_service_acts_only_for_members_of_its_own_organization(app: &TestApp) {
    let store = &app.state.core.store;
    let now = app.now();
    let acme = store.organizations().create(&slug("acme"), "Acme", now).await.unwrap();
    let globex = store.organizations().create(&slug("globex"), "Globex", now).await.unwrap();
    let default = store.organizations().default_organization().await.unwrap();
    let (alice, bob) = (app.user_id(ALICE).await, app.user_id(BOB).await);
    for (org, user) in [(&acme, &alice), (&globex, &bob)] {
        store.in_org(&org.id).members().add(user, oauth_broker::domain::OrgRole::Member, now).await.unwrap();
        assert!(store.in_org(&default.id).members().remove(user, app.now()).await.unwrap());
    }
    let in_org = |org, resource: Option<&'static str>, trusted| ServiceOptions {
        resource,
        trusted,
        org: Some(org),
        ..Default::default()
    };
    let acme_tools = register_service(app, "acme-tools", &["demo"], in_org(&acme.id, Some(ACME_RESOURCE), false)).await;
    let acme_back = register_service(app, "acme-back", &["demo"], in_org(&acme.id, None, true)).await;
    let globex_tools =
        register_service(app, "globex-tools", &["demo"], in_org(&globex.id, Some(GLOBEX_RESOURCE), false)).await;
    let globex_back = register_service(app, "globex-back", &["demo"], in_org(&globex.id, None, true)).await;

    // Alice connects through her organization's service, which then gets her token.
    let (status, body) = tokens(app, &acme_back, json!({"user_id": alice, "provider": "demo"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let problem: Value = serde_json::from_str(&body).unwrap();
    app.approve_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;
    let (status, body) = tokens(app, &acme_back, json!({"user_id": alice, "provider": "demo"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let alice_for_acme = user_token_for(app, ALICE, ACME_RESOURCE).await;
    let (status, body) = tokens(app, &acme_tools, json!({"subject_token": alice_for_acme, "provider": "demo"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "acme-tools is a new client of hers: she is asked: {body}");
    let problem: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(problem["reason"], "consent_required");
    app.allow_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;
    let (status, body) = tokens(app, &acme_tools, json!({"subject_token": alice_for_acme, "provider": "demo"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Globex's services against Alice: a token really issued for globex's resource (her MCP
    // client was sent there), and her id. Each answer is the one for nobody at all.
    let before = snapshot(app).await;
    let alice_for_globex = user_token_for(app, ALICE, GLOBEX_RESOURCE).await;
    let nobody_token = "eyJhbGciOiJFUzI1NiJ9.e30.c2lnbmF0dXJl";
    let cases: Vec<(&str, Seen, Seen)> = vec![
        (
            "/v1/tokens with her token",
            tokens(app, &globex_tools, json!({"subject_token": alice_for_globex, "provider": "demo"})).await,
            tokens(app, &globex_tools, json!({"subject_token": nobody_token, "provider": "demo"})).await,
        ),
        (
            "/v1/tokens with her id",
            tokens(app, &globex_back, json!({"user_id": alice, "provider": "demo"})).await,
            tokens(app, &globex_back, json!({"user_id": "no-such-user", "provider": "demo"})).await,
        ),
        (
            "/v1/proxy with her token",
            proxy(app, &globex_tools, ("x-subject-token", &alice_for_globex)).await,
            proxy(app, &globex_tools, ("x-subject-token", nobody_token)).await,
        ),
        (
            "/v1/proxy with her id",
            proxy(app, &globex_back, ("x-user-id", &alice)).await,
            proxy(app, &globex_back, ("x-user-id", "no-such-user")).await,
        ),
        (
            "/v1/connections with her token",
            connections(app, &globex_tools, ("x-subject-token", &alice_for_globex)).await,
            connections(app, &globex_tools, ("x-subject-token", nobody_token)).await,
        ),
        (
            "/v1/connections with her id",
            connections(app, &globex_back, ("x-user-id", &alice)).await,
            connections(app, &globex_back, ("x-user-id", "no-such-user")).await,
        ),
        (
            "/token exchange with her token",
            exchange(app, &globex_tools, &alice_for_globex).await,
            exchange(app, &globex_tools, nobody_token).await,
        ),
    ];
    for (path, hers, nobodys) in &cases {
        assert!(hers.0.is_client_error(), "{path}: refused: {hers:?}");
        assert_eq!(hers, nobodys, "{path}: refused as nobody is");
        assert!(!hers.1.contains(&alice) && !hers.1.contains("acme"), "{path}: nothing of her: {}", hers.1);
    }
    assert_eq!(snapshot(app).await, before, "no attempt, grant, consent or provider token came of it");

    // Bob, globex's own, is served by globex's services (connecting first, as anyone).
    let (status, body) = tokens(app, &globex_back, json!({"user_id": bob, "provider": "demo"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    // ... and refused by acme's.
    let (status, _) = tokens(app, &acme_back, json!({"user_id": bob, "provider": "demo"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Alice leaves acme: acme's services stop acting for her at once.
    assert!(store.in_org(&acme.id).members().remove(&alice, app.now()).await.unwrap());
    assert_eq!(
        tokens(app, &acme_back, json!({"user_id": alice, "provider": "demo"})).await,
        tokens(app, &acme_back, json!({"user_id": "no-such-user", "provider": "demo"})).await,
    );
    assert_eq!(
        tokens(app, &acme_tools, json!({"subject_token": alice_for_acme, "provider": "demo"})).await,
        tokens(app, &acme_tools, json!({"subject_token": nobody_token, "provider": "demo"})).await,
    );
}
on_both_backends!(token_api, a_service_acts_only_for_members_of_its_own_organization);

/// The CLI, in a process of its own, takes Alice out of acme while the server runs: its cached
/// answer about her goes within the watcher's interval, as for every cached row.
async fn a_member_removed_by_another_process_is_refused_by_the_running_server(app: &TestApp) {
    let store = &app.state.core.store;
    let acme = store.organizations().create(&slug("acme"), "Acme", app.now()).await.unwrap();
    let alice = app.user_id(ALICE).await;
    store.in_org(&acme.id).members().add(&alice, oauth_broker::domain::OrgRole::Member, app.now()).await.unwrap();
    let back = register_service(
        app,
        "acme-back",
        &["demo"],
        ServiceOptions { trusted: true, org: Some(&acme.id), ..Default::default() },
    )
    .await;
    let ask = json!({"user_id": alice, "provider": "demo"});
    let (status, body) = tokens(app, &back, ask.clone()).await;
    assert_eq!(status, StatusCode::CONFLICT, "served (not connected yet): {body}");
    crate::helpers::cli::admin_elsewhere(app, &["orgs", "leave", "acme", ALICE]).await;
    eventually("the server refuses alice for acme", std::time::Duration::from_secs(20), || async {
        match tokens(app, &back, ask.clone()).await {
            (StatusCode::BAD_REQUEST, _) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}
on_both_backends!(removed_elsewhere, a_member_removed_by_another_process_is_refused_by_the_running_server);

fn slug(text: &str) -> oauth_broker::domain::OrgSlug {
    oauth_broker::domain::OrgSlug::parse(text).unwrap()
}
