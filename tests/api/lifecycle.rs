//! Token lifecycle against a provider's quirks (issue 12, "Lifecycle").

use std::time::Duration;

use oauth_broker::store::grants::GrantStatus;

use crate::helpers::{ALICE, Backend, TestApp};
use crate::refresh_faults::{connect_strict, me, spawn, status_of};
use crate::strict_provider::StrictProvider;

async fn strict_grant(app: &TestApp) -> oauth_broker::store::grants::GrantRow {
    app.state.store.grant(&app.user_id(ALICE).await, "strict").await.unwrap().unwrap()
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
