//! Token lifecycle against a provider's quirks (issue 12, "Lifecycle").

use std::time::Duration;

use oauth_broker::store::grants::GrantStatus;

use crate::helpers::strict_provider::{StrictProvider, connect_strict, me, spawn, status_of};
use crate::helpers::{ALICE, Backend, TestApp};

async fn strict_grant(app: &TestApp) -> oauth_broker::store::grants::GrantRow {
    app.state.core.store.grants().latest(&app.user_id(ALICE).await, "strict", None).await.unwrap().unwrap()
}

/// RFC 6749 §6: a refresh answer without `refresh_token` means "keep using the one you have".
/// Dropping it would strand the grant at the next expiry.
async fn a_refresh_answer_without_a_new_refresh_token_keeps_the_old_one(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(60)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    let client = connect_strict(&app).await;
    provider.stop_rotating();

    // Act: two expiries, two refreshes; the provider never sends a new refresh token.
    for round in 1..=2 {
        app.clock.advance(120);
        assert_eq!(status_of(&me(&client).await.unwrap()), 200, "refresh {round} works");
    }

    // Assert: both refreshes presented the same, still valid, refresh token.
    assert_eq!(provider.refreshes_answered(), 2);
    assert_eq!(provider.invalid_grants(), 0, "the kept refresh token was never refused");
    let grant = strict_grant(&app).await;
    assert_eq!(grant.status, GrantStatus::Active);
    assert!(grant.refresh_token_sealed.is_some(), "the grant still holds a refresh token");
    assert!(grant.expires_at.unwrap() > app.now());
    client.close().await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_answer_without_a_new_refresh_token_keeps_the_old_one_sqlite() {
    a_refresh_answer_without_a_new_refresh_token_keeps_the_old_one(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_answer_without_a_new_refresh_token_keeps_the_old_one_postgres() {
    a_refresh_answer_without_a_new_refresh_token_keeps_the_old_one(Backend::Postgres).await;
}

/// The newest `grant.disconnected` audit entry's detail for ALICE.
async fn disconnected_detail(app: &TestApp) -> String {
    let entries = app.state.core.store.audit().entries(Some(&app.user_id(ALICE).await), 50).await.unwrap();
    let entry = entries.iter().find(|e| e.action == "grant.disconnected").expect("a disconnect is audited");
    entry.detail.clone().unwrap_or_default()
}

async fn disconnect_text(client: &crate::helpers::McpClient, provider: &str) -> String {
    let result = client.call("disconnect_account", serde_json::json!({"provider": provider})).await.unwrap();
    serde_json::to_string(&result.content).unwrap()
}

/// Disconnecting tells the user and the audit log what the provider was told: revoked (the
/// demo provider implements RFC 7009), no revocation offered (the strict provider has none),
/// or failed with why (a revocation endpoint that does not answer) — never "revoked" for all.
async fn disconnecting_reports_the_revocation_outcome_truthfully(backend: Backend) {
    // Revoked: the demo provider, which then refuses the token.
    let Some(app) = crate::helpers::spawn_app(backend).await else { return };
    let client = app.connected_client(ALICE).await;
    let text = disconnect_text(&client, "demo").await;
    assert!(text.contains("its tokens were revoked"), "{text}");
    assert_eq!(disconnected_detail(&app).await, "account=demo-user revocation=revoked");
    client.close().await;
    app.stop().await;

    // No revocation offered.
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    let client = connect_strict(&app).await;
    let text = disconnect_text(&client, "strict").await;
    assert!(text.contains("offers no revocation"), "{text}");
    assert!(disconnected_detail(&app).await.ends_with("revocation=not_offered"));
    client.close().await;
    app.stop().await;

    // Failed, with why: the revocation endpoint refuses connections.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}/revoke", dead.local_addr().unwrap());
    drop(dead);
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let options = crate::helpers::SpawnOptions {
        toml: format!("{}revocation_url = \"{dead_url}\"\n", provider.toml()),
        ..Default::default()
    };
    let Some(app) = crate::helpers::spawn_app_opts(backend, options, |b| b).await else { return };
    let client = connect_strict(&app).await;
    let text = disconnect_text(&client, "strict").await;
    assert!(text.contains("did not confirm the revocation"), "{text}");
    let detail = disconnected_detail(&app).await;
    assert!(detail.contains("revocation=failed (the provider is unavailable"), "{detail}");
    assert!(strict_grant_gone(&app).await, "the grant is deleted here all the same");
    client.close().await;
    app.stop().await;
}

async fn strict_grant_gone(app: &TestApp) -> bool {
    app.state.core.store.grants().latest(&app.user_id(ALICE).await, "strict", None).await.unwrap().is_none()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnecting_reports_the_revocation_outcome_truthfully_sqlite() {
    disconnecting_reports_the_revocation_outcome_truthfully(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnecting_reports_the_revocation_outcome_truthfully_postgres() {
    disconnecting_reports_the_revocation_outcome_truthfully(Backend::Postgres).await;
}

/// The connections page tells the user what the provider was told; a crafted link shows only a
/// configured provider's name with one of the fixed outcomes, or nothing.
async fn the_connections_page_says_what_revoking_did_at_the_provider(backend: Backend) {
    let Some(app) = crate::helpers::spawn_app(backend).await else { return };
    let client = app.connected_client(ALICE).await;
    let browser = app.browser();
    assert_eq!(app.sign_in(&browser, ALICE, "/connections").await.status(), 303);
    let html = browser.get(app.url("/connections")).send().await.unwrap().text().await.unwrap();
    let csrf = crate::helpers::hidden_field(&html, "csrf_token").unwrap();
    let grant_id = crate::helpers::hidden_field(&html, "grant_id").unwrap();

    let revoked = browser
        .post(app.url("/connections/revoke"))
        .form(&[("csrf_token", csrf.as_str()), ("grant_id", grant_id.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 303);
    let page = browser.get(app.url(&crate::helpers::location(&revoked))).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("connection was revoked at"), "{page}");
    assert!(disconnected_detail(&app).await.ends_with("revocation=revoked"));

    for crafted in
        ["?revocation=revoked&provider=%3Cscript%3E", "?revocation=%3Cb%3Ehi&provider=demo", "?provider=demo"]
    {
        let page = browser.get(app.url(&format!("/connections{crafted}"))).send().await.unwrap().text().await.unwrap();
        assert!(!page.contains("id=\"notice\""), "{crafted} shows no notice");
    }
    client.close().await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connections_page_says_what_revoking_did_at_the_provider_sqlite() {
    the_connections_page_says_what_revoking_did_at_the_provider(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connections_page_says_what_revoking_did_at_the_provider_postgres() {
    the_connections_page_says_what_revoking_did_at_the_provider(Backend::Postgres).await;
}
