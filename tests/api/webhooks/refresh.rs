//! Webhook events from the token lifecycle (issue 27): a refresh that starts failing at the
//! strict provider, its recovery, and a grant that needs a new consent — each delivered once,
//! in order, to a real receiver that verifies the signatures.

use std::time::Duration;

use oauth_broker::clock::iso_time;
use oauth_broker::store::grants::GrantStatus;

use crate::helpers::strict_provider::{StrictProvider, connect_strict, me, spawn, status_of};
use crate::helpers::webhooks::{Receiver, WEBHOOK_TOML, service_with_webhook};
use crate::helpers::{ALICE, Backend, eventually};

async fn a_failing_refresh_its_recovery_and_a_lost_grant_reach_the_webhook(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(30)).await;
    let Some(app) = spawn(backend, &provider, WEBHOOK_TOML).await else { return };
    let receiver = Receiver::start().await;
    service_with_webhook(&app, "watcher", &["strict"], &receiver).await;
    let client = connect_strict(&app).await;
    assert_eq!(receiver.wait_for(1).await[0].event_type(), "connection.created");

    // The token expires and the provider answers the refresh 503 (Retry-After 20), twice: one
    // event for the episode, with the kind of error and when it is tried again.
    app.clock.advance(31);
    provider.fail_next_refreshes(2, 503, Some(20));
    let failed_at = app.now();
    me(&client).await.unwrap();
    app.clock.advance(20);
    me(&client).await.unwrap();
    let got = receiver.wait_for(2).await;
    assert_eq!(got[1].event_type(), "connection.refresh_failed");
    assert_eq!(got[1].body["data"]["error"], "server_error");
    assert_eq!(got[1].body["data"]["next_retry_at"], iso_time(failed_at + 20).as_str());
    assert_eq!(got[1].body["data"]["provider"], "strict");

    // The next refresh works: recovered.
    app.clock.advance(20);
    assert_eq!(status_of(&me(&client).await.unwrap()), 200);
    let got = receiver.wait_for(3).await;
    assert_eq!(got[2].event_type(), "connection.recovered");

    // The stored refresh token no longer opens (as after a key loss): a new consent is needed.
    sqlx::query("UPDATE grants SET refresh_token_sealed = access_token_sealed")
        .execute(app.state.core.store.pool())
        .await
        .unwrap();
    app.clock.advance(31);
    let _ = me(&client).await;
    let user = app.user_id(ALICE).await;
    eventually("the grant needs a new consent", Duration::from_secs(30), || async {
        app.state
            .core
            .store
            .grants()
            .latest(&user, "strict", None)
            .await
            .unwrap()
            .is_some_and(|g| g.status == GrantStatus::NeedsReconsent)
    })
    .await;
    let got = receiver.wait_for(4).await;
    assert_eq!(got[3].event_type(), "connection.needs_reauthorization");
    assert!(got[3].body["data"]["reason"].as_str().unwrap().contains("could not be opened"));

    // Once each.
    eventually("nothing is pending", Duration::from_secs(30), || async {
        app.state
            .core
            .store
            .webhook_events()
            .list(None, Some(oauth_broker::store::webhooks::DeliveryStatus::Pending), 10)
            .await
            .unwrap()
            .is_empty()
    })
    .await;
    assert_eq!(receiver.received().len(), 4);
    assert_eq!(receiver.unverified(), 0);
    client.close().await;
    receiver.stop();
    app.stop().await;
}

mod refresh_events {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        super::a_failing_refresh_its_recovery_and_a_lost_grant_reach_the_webhook(crate::helpers::Backend::Sqlite).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        super::a_failing_refresh_its_recovery_and_a_lost_grant_reach_the_webhook(crate::helpers::Backend::Postgres)
            .await;
    }
}
