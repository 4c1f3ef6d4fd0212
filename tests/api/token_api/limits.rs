//! The token API's limits (issue 9, `src/identity/service_limits.rs`, `src/api/wait_slots.rs`) on
//! one instance, on both databases: the request budget per service, the cap on open waits, and
//! failed authentications by address. The two-process tests are in `operating/cluster.rs`.

use std::time::Duration;

use serde_json::json;

use crate::helpers::token_api::{
    RESOURCE, ServiceCredentials, answer, app_with, assert_rate_limited, notes_service, pending_authorization, poll,
    slots_become, user_token_for,
};
use crate::helpers::*;

/// A well-formed authorization id nobody has: every service gets 404 for it.
const NO_SUCH_AUTHORIZATION: &str = "0123456789abcdef0123456789abcdef";

async fn limited_audits(app: &TestApp, actor: &str, limit: &str) -> usize {
    let entries = app.state.core.store.audit().entries(None, 1000).await.unwrap();
    entries
        .iter()
        .filter(|e| e.action == "token_api.limited")
        .filter(|e| e.actor.as_deref() == Some(actor) && e.detail.as_deref() == Some(&format!("limit={limit}")))
        .filter(|e| e.outcome.as_deref() == Some("refused"))
        .count()
}

async fn the_request_budget_is_per_service_and_refills_at_its_rate(backend: Backend) {
    let toml = "[token_api]\nrequests_per_minute = 5\n[token_api.services.svc_bulk]\nrequests_per_minute = 8\n";
    let Some(app) = app_with(backend, toml).await else { return };
    let base = app.url("");
    let base = base.trim_end_matches('/');
    let notes = notes_service(&app, "notes").await;
    let other = notes_service(&app, "other").await;
    let bulk = notes_service(&app, "bulk").await;

    for _ in 0..5 {
        assert_eq!(poll(base, &notes, NO_SUCH_AUTHORIZATION, 0).await.status, 404);
    }
    // A minute's budget at once; the sixth is refused until one request's share of the minute
    // (12 s) has passed, and refusals do not extend the wait.
    assert_rate_limited(&poll(base, &notes, NO_SUCH_AUTHORIZATION, 0).await, "requests", 12);
    app.clock.advance(6);
    assert_rate_limited(&poll(base, &notes, NO_SUCH_AUTHORIZATION, 0).await, "requests", 6);
    // Every endpoint takes from the same budget: the token request and the RFC 8693 exchange.
    let token = user_token_for(&app, ALICE, RESOURCE).await;
    let refused = app
        .http()
        .post(app.url("/v1/tokens"))
        .basic_auth(&notes.client_id, Some(&notes.secret))
        .json(&json!({"subject_token": token, "provider": "demo"}))
        .send()
        .await
        .unwrap();
    assert_rate_limited(&answer(refused).await, "requests", 6);
    let exchange = app
        .http()
        .post(app.url("/token"))
        .basic_auth(&notes.client_id, Some(&notes.secret))
        .form(&[
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"),
            ("subject_token", token.as_str()),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:access_token"),
            ("provider", "demo"),
        ])
        .send()
        .await
        .unwrap();
    let exchange = answer(exchange).await;
    assert_eq!(exchange.status, 429);
    assert_eq!((exchange.body["error"].as_str(), exchange.retry_after), (Some("rate_limited"), Some(6)));
    // Nothing was opened by the refused token request.
    let alice = app.user_id(ALICE).await;
    assert!(app.state.core.store.authorizations().for_user(&alice, 10).await.unwrap().is_empty());

    // Another service has its own budget; one with its own limit gets that many.
    assert_eq!(poll(base, &other, NO_SUCH_AUTHORIZATION, 0).await.status, 404);
    for _ in 0..8 {
        assert_eq!(poll(base, &bulk, NO_SUCH_AUTHORIZATION, 0).await.status, 404);
    }
    // 60 s / 8 = 7.5 s, rounded up.
    assert_rate_limited(&poll(base, &bulk, NO_SUCH_AUTHORIZATION, 0).await, "requests", 8);

    // Once a request's share has passed, one more request fits, and then the next share.
    app.clock.advance(6);
    assert_eq!(poll(base, &notes, NO_SUCH_AUTHORIZATION, 0).await.status, 404);
    assert_rate_limited(&poll(base, &notes, NO_SUCH_AUTHORIZATION, 0).await, "requests", 12);
    assert_eq!(limited_audits(&app, "service:svc_notes", "requests").await, 5);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_budget_sqlite() {
    the_request_budget_is_per_service_and_refills_at_its_rate(Backend::Sqlite).await;
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_budget_postgres() {
    the_request_budget_is_per_service_and_refills_at_its_rate(Backend::Postgres).await;
}

async fn open_waits_are_capped_and_a_slot_frees_when_its_wait_ends_or_lapses(backend: Backend) {
    let Some(app) = app_with(backend, "[token_api]\nopen_waits = 1\n").await else { return };
    let base = app.url("");
    let base = base.trim_end_matches('/');
    let notes = notes_service(&app, "notes").await;
    let other = notes_service(&app, "other").await;
    let id = pending_authorization(&app, &notes).await;
    let other_id = pending_authorization(&app, &other).await;

    // An event stream holds the only slot while it is open.
    let mut stream = app
        .http()
        .get(app.url(&format!("/v1/authorizations/{id}/events")))
        .basic_auth(&notes.client_id, Some(&notes.secret))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let first = tokio::time::timeout(Duration::from_secs(10), stream.chunk()).await.unwrap().unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("pending"));
    slots_become(&app, &notes, 1).await;

    assert_rate_limited(&poll(base, &notes, &id, 5).await, "open_waits", 2);
    let second_stream = app
        .http()
        .get(app.url(&format!("/v1/authorizations/{id}/events")))
        .basic_auth(&notes.client_id, Some(&notes.secret))
        .send()
        .await
        .unwrap();
    assert_rate_limited(&answer(second_stream).await, "open_waits", 2);
    // Asking without waiting needs no slot; another service has its own.
    assert_eq!(poll(base, &notes, &id, 0).await.body["status"], "pending");
    assert_eq!(poll(base, &other, &other_id, 1).await.body["status"], "pending");
    assert_eq!(limited_audits(&app, "service:svc_notes", "open_waits").await, 2);

    // Closing the stream frees the slot.
    drop(stream);
    slots_become(&app, &notes, 0).await;
    assert_eq!(poll(base, &notes, &id, 1).await.body["status"], "pending");
    slots_become(&app, &notes, 0).await;

    // A slot whose instance died (never renewed, never released) counts until its lease ends.
    let lease = app.state.core.config.token_api.wait_lease.as_secs() as i64;
    assert!(
        app.state
            .core
            .store
            .api_limits()
            .wait_slot_take("dead", &notes.client_id, app.now(), app.now() + lease, 1)
            .await
            .unwrap()
    );
    assert_rate_limited(&poll(base, &notes, &id, 1).await, "open_waits", 2);
    app.clock.advance(lease);
    assert_eq!(poll(base, &notes, &id, 1).await.body["status"], "pending");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_waits_sqlite() {
    open_waits_are_capped_and_a_slot_frees_when_its_wait_ends_or_lapses(Backend::Sqlite).await;
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_waits_postgres() {
    open_waits_are_capped_and_a_slot_frees_when_its_wait_ends_or_lapses(Backend::Postgres).await;
}

async fn failed_authentications_lock_the_address_even_for_the_right_secret(backend: Backend) {
    let Some(app) = app_with(backend, "").await else { return };
    let base = app.url("");
    let base = base.trim_end_matches('/');
    let notes = notes_service(&app, "notes").await;
    let wrong = ServiceCredentials { client_id: notes.client_id.clone(), secret: "obs_guess".into(), resource: None };
    let unknown = ServiceCredentials { client_id: "svc_nobody".into(), secret: "obs_guess".into(), resource: None };

    for attempt in 0..20 {
        let guess = if attempt % 2 == 0 { &wrong } else { &unknown };
        assert_eq!(poll(base, guess, NO_SUCH_AUTHORIZATION, 0).await.status, 401, "attempt {attempt}");
    }
    // The address is locked: the right secret learns nothing either, and nothing is counted.
    let locked = poll(base, &notes, NO_SUCH_AUTHORIZATION, 0).await;
    assert_rate_limited(&locked, "failed_authentication", 600);
    assert!(!locked.body.to_string().contains(&notes.secret));
    assert_rate_limited(&poll(base, &wrong, NO_SUCH_AUTHORIZATION, 0).await, "failed_authentication", 600);
    assert_eq!(limited_audits(&app, "visitor", "failed_authentication").await, 2);
    app.clock.advance(599);
    assert_rate_limited(&poll(base, &notes, NO_SUCH_AUTHORIZATION, 0).await, "failed_authentication", 1);

    app.clock.advance(1);
    assert_eq!(poll(base, &notes, NO_SUCH_AUTHORIZATION, 0).await.status, 404);
    // A correct secret is never counted as a failure: the service keeps working.
    for _ in 0..25 {
        assert_eq!(poll(base, &notes, NO_SUCH_AUTHORIZATION, 0).await.status, 404);
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_authentication_sqlite() {
    failed_authentications_lock_the_address_even_for_the_right_secret(Backend::Sqlite).await;
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_authentication_postgres() {
    failed_authentications_lock_the_address_even_for_the_right_secret(Backend::Postgres).await;
}
