//! The token API's audit events are written in batches from a bounded queue
//! (`src/store/token_api/audit_queue.rs`): a graceful stop — SIGTERM's path, `App::run` ending —
//! writes every one, so the rows equal the requests answered, even with requests still arriving.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use serde_json::{Value, json};

use crate::helpers::token_api::{ServiceCredentials, ServiceOptions, register_service, user_token_for};
use crate::helpers::*;

const RESOURCE: &str = "https://tools.example/mcp";
const WORKERS: usize = 16;
/// Requests answered before the stop begins.
const BEFORE_STOP: i64 = 300;

async fn token_rows(app: &TestApp) -> i64 {
    let (count,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM audit_log WHERE action = 'token_api.token' AND actor = 'service:svc_notes'",
    )
    .fetch_one(app.state.core.store.pool())
    .await
    .unwrap();
    count
}

async fn ask(http: &reqwest::Client, url: &str, service: &ServiceCredentials, body: &Value) -> reqwest::Response {
    http.post(url).basic_auth(&service.client_id, Some(&service.secret)).json(body).send().await.unwrap()
}

async fn a_burst_of_token_requests_then_a_graceful_stop_loses_no_audit_row(backend: Backend) {
    let Some(mut app) = spawn_app(backend).await else { return };
    let service =
        register_service(&app, "notes", &["demo"], ServiceOptions { resource: Some(RESOURCE), ..Default::default() })
            .await;
    let token = user_token_for(&app, ALICE, RESOURCE).await;
    let body = json!({"subject_token": token, "provider": "demo"});
    let url = app.url("/v1/tokens");
    // Arrange: alice connects the demo provider for this service (one answered request).
    let first = ask(&app.http(), &url, &service, &body).await;
    assert_eq!(first.status(), 409);
    let problem: Value = first.json().await.unwrap();
    app.approve_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;
    let answered = Arc::new(AtomicI64::new(1));

    // Act: 16 workers ask until the server stops under them, as on SIGTERM, once a few
    // hundred requests were answered.
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (url, service, body, answered) = (url.clone(), service.clone(), body.clone(), answered.clone());
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                loop {
                    let sent = http.post(&url).basic_auth(&service.client_id, Some(&service.secret)).json(&body);
                    match sent.send().await {
                        Ok(response) if response.status() == 200 => answered.fetch_add(1, Ordering::SeqCst),
                        // Refused at the door (connection closed): never answered, never audited.
                        Ok(response) => panic!("unexpected {}", response.status()),
                        Err(_) => return,
                    };
                }
            })
        })
        .collect();
    eventually("a few hundred requests are answered", std::time::Duration::from_secs(60), || async {
        answered.load(Ordering::SeqCst) >= BEFORE_STOP
    })
    .await;
    app.stop_serving().await;
    for worker in workers {
        worker.await.unwrap();
    }

    // Assert: one row per answered request, written by the stop at the latest.
    assert_eq!(token_rows(&app).await, answered.load(Ordering::SeqCst));
    assert!(answered.load(Ordering::SeqCst) >= BEFORE_STOP);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_stop_audit_sqlite() {
    a_burst_of_token_requests_then_a_graceful_stop_loses_no_audit_row(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_stop_audit_postgres() {
    a_burst_of_token_requests_then_a_graceful_stop_loses_no_audit_row(Backend::Postgres).await;
}

/// Token-API answers arrive thousands a second, so the batch writer does not index each row's
/// text or count each row on its own (migration 0032): rows share one `audit_texts` row per
/// distinct text, and each batch counts its answers per hour, service and outcome. The search
/// and the dashboard must still see exactly what they saw when every row was indexed and
/// counted by itself — here for rows far older than the search's first look (the newest 3,000
/// rows), so only the index can find them, next to a row of the same service written directly.
async fn batched_token_rows_are_found_and_counted_as_rows_written_one_by_one(backend: Backend) {
    use oauth_broker::store::audit::{Actor, AuditEvent, Outcome};
    use oauth_broker::store::paging::{Search, Window};

    let Some(app) = spawn_app(backend).await else { return };
    let store = &app.state.core.store;
    let now = app.now();
    for _ in 0..5 {
        let event = AuditEvent::new(Actor::Service("svc_rarely"), "token_api.token", None)
            .provider(Some("demo"))
            .detail(Some("answer=token"));
        store.audit_queue().record(now, event).await.unwrap();
    }
    let event = AuditEvent::new(Actor::Service("svc_rarely"), "token_api.limited", None)
        .detail(Some("limit=requests"))
        .outcome(Outcome::Refused);
    store.audit().record(now, event).await.unwrap();
    // A queued row whose text names its user and a latency is indexed by itself.
    let event = AuditEvent::new(Actor::User("u-rarely"), "gateway.call", Some("u-rarely"))
        .detail(Some("server=rarely tool=echo outcome=ok latency_ms=3"));
    store.audit_queue().record(now, event).await.unwrap();
    let written = "SELECT (SELECT COUNT(*) FROM audit_log WHERE actor = 'service:svc_rarely' AND text_id IS NOT NULL), \
                   (SELECT COUNT(*) FROM audit_log WHERE action = 'gateway.call' AND text_id IS NULL)";
    eventually("the batch writer wrote the queued rows", std::time::Duration::from_secs(10), || async {
        let counts: (i64, i64) = sqlx::query_as(written).fetch_one(store.pool()).await.unwrap();
        counts == (5, 1)
    })
    .await;
    let (texts,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM audit_texts WHERE text LIKE '%rarely%'")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(texts, 1, "five answers with the same text share one; the gateway call has none");
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4000) \
         INSERT INTO audit_log (at, user_id, action, provider, detail, actor, outcome) \
         SELECT $1, NULL, 'test.bulk', NULL, 'row-' || i, 'broker', 'success' FROM n",
    )
    .bind(now)
    .execute(store.pool())
    .await
    .unwrap();

    // Found through the shared text (the five) and the row's own index (the refusal), by any
    // part of the text, exactly as a read of the whole table would find them.
    for (term, expected) in
        [("svc_rarely", 6), ("RARELY", 7), ("rarely token_api.token", 0), ("answer=token", 5), ("latency_ms=3", 1)]
    {
        let found = store.audit().page(&Search::new(term), Window::first(20)).await.unwrap();
        let (n,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM audit_log WHERE LOWER(action || ' ' || COALESCE(actor, '') || ' ' || \
             COALESCE(outcome, '') || ' ' || COALESCE(provider, '') || ' ' || COALESCE(detail, '')) LIKE $1",
        )
        .bind(format!("%{}%", term.to_lowercase()))
        .fetch_one(store.pool())
        .await
        .unwrap();
        assert_eq!((found.rows.len() as i64, n), (expected, expected), "{term}");
    }
    let found = store.audit().page(&Search::new("svc_rarely"), Window::first(20)).await.unwrap();
    assert!(found.rows.iter().all(|row| row.actor.as_deref() == Some("service:svc_rarely")), "{:?}", found.rows);

    // Counted once each: the batch's five per group, the direct refusal by its trigger.
    let counts = store.console().hourly_counts(now - 3600).await.unwrap();
    let at = |sub: &str| {
        counts
            .iter()
            .filter(|c| c.series == "token_api" && c.label == "svc_rarely" && c.sub == sub)
            .map(|c| c.n)
            .sum::<i64>()
    };
    assert_eq!((at("success"), at("refused")), (5, 1), "{counts:?}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_token_rows_found_and_counted_sqlite() {
    batched_token_rows_are_found_and_counted_as_rows_written_one_by_one(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_token_rows_found_and_counted_postgres() {
    batched_token_rows_are_found_and_counted_as_rows_written_one_by_one(Backend::Postgres).await;
}
