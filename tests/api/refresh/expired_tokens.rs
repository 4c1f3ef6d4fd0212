//! Refreshing expired tokens: before use, once per grant even under concurrency (the demo
//! provider rotates refresh tokens and revokes the family on reuse), and `invalid_grant`
//! turning into a new consent.

use rmcp::ServiceError;
use serde_json::json;

use oauth_broker::store::grants::GrantStatus;

use crate::helpers::{ALICE, TestApp};
use crate::on_both_backends;

async fn me(client: &crate::helpers::McpClient) -> Result<rmcp::model::CallToolResult, ServiceError> {
    client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await
}

async fn an_expired_access_token_is_refreshed_once_even_under_concurrent_calls(app: &TestApp) {
    let client = std::sync::Arc::new(app.connected_client(ALICE).await);
    let user = app.user_id(ALICE).await;
    let before = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();

    // The demo provider's access tokens live an hour.
    app.clock.advance(2 * 3600);
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { me(&client).await })
        })
        .collect();
    for call in calls {
        let result = call.await.unwrap().unwrap();
        assert_eq!(result.structured_content.unwrap()["status"], 200, "every concurrent call succeeds");
    }
    let after = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
    assert_eq!(after.status, GrantStatus::Active);
    assert_eq!(after.version, before.version + 2, "one lease claim and one store: exactly one refresh");
    assert!(after.expires_at.unwrap() > app.now());
    assert_ne!(after.refresh_token_sealed, before.refresh_token_sealed, "the rotated refresh token was stored");
    let audit = app.state.core.store.audit().entries(Some(&user), 50).await.unwrap();
    assert_eq!(audit.iter().filter(|e| e.action == "grant.refreshed").count(), 1);
}
on_both_backends!(refresh_once, an_expired_access_token_is_refreshed_once_even_under_concurrent_calls);

async fn a_refused_refresh_token_asks_for_consent_again(app: &TestApp) {
    let client = app.connected_client(ALICE).await;
    // Past the demo refresh token's 30-day life: the provider answers invalid_grant.
    app.clock.advance(31 * 24 * 3600);
    match me(&client).await {
        Err(ServiceError::McpError(e)) => assert_eq!(e.code.0, -32042),
        other => panic!("expected -32042 after invalid_grant, got {other:?}"),
    }
    let grant = app.state.core.store.grants().latest(&app.user_id(ALICE).await, "demo", None).await.unwrap().unwrap();
    assert_eq!(grant.status, GrantStatus::NeedsReconsent);
    let listed = client.call("list_connections", json!({})).await.unwrap();
    assert_eq!(listed.structured_content.unwrap()["connections"][0]["status"], "needs_reconsent");
}
on_both_backends!(reconsent, a_refused_refresh_token_asks_for_consent_again);

/// A sealed token that no longer opens (here: one flipped bit) leaves the user a way forward:
/// the grant is marked for a new consent, audited, shown as such, and the next call answers
/// with a fresh connect link instead of an internal error.
async fn a_stored_token_that_no_longer_opens_sends_the_user_to_connect_again(app: &TestApp) {
    let client = app.connected_client(ALICE).await;
    let user = app.user_id(ALICE).await;
    let grant = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
    let mut tampered = grant.access_token_sealed.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x01;
    sqlx::query("UPDATE grants SET access_token_sealed = $1 WHERE id = $2")
        .bind(tampered)
        .bind(&grant.id)
        .execute(app.state.core.store.pool())
        .await
        .unwrap();

    let answer = client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    match answer {
        Err(ServiceError::McpError(error)) => assert_eq!(error.code.0, -32042, "{error:?}"),
        other => panic!("expected a connect link (-32042), got {other:?}"),
    }
    let listed = client.call("list_connections", json!({})).await.unwrap();
    let demo = &listed.structured_content.unwrap()["connections"][0];
    assert_eq!(demo["status"], "needs_reconsent", "{demo}");
    let audit = app.state.core.store.audit().entries(Some(&user), 50).await.unwrap();
    assert!(
        audit.iter().any(|e| e.action == "grant.needs_reconsent"
            && e.detail.as_deref().is_some_and(|d| d.contains("could not be opened"))),
        "audited"
    );

    // Disconnecting it deletes it, and says nothing could be revoked rather than claiming so.
    let grant = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
    let mut refresh = grant.refresh_token_sealed.clone().expect("the demo provider issues refresh tokens");
    let last = refresh.len() - 1;
    refresh[last] ^= 0x01;
    sqlx::query("UPDATE grants SET refresh_token_sealed = $1 WHERE id = $2")
        .bind(refresh)
        .bind(&grant.id)
        .execute(app.state.core.store.pool())
        .await
        .unwrap();
    let grant = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
    let provider = app.state.core.providers.find("demo").unwrap();
    let outcome = oauth_broker::broker::tokens::disconnect_grant(&app.state.core, &provider, &grant).await.unwrap();
    assert!(outcome.deleted);
    assert_eq!(outcome.revocation, oauth_broker::broker::tokens::Revocation::TokenUnreadable);
}
on_both_backends!(broken_sealed_token, a_stored_token_that_no_longer_opens_sends_the_user_to_connect_again);
