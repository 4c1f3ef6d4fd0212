//! The token API's audit events are written in batches from a bounded queue
//! (`src/store/audit_queue.rs`): a graceful stop — SIGTERM's path, `App::run` ending — writes
//! every one, so the rows equal the requests answered, even with requests still arriving.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use serde_json::{Value, json};

use crate::helpers::*;
use crate::token_api::{ServiceCredentials, ServiceOptions, register_service, user_token_for};

const RESOURCE: &str = "https://tools.example/mcp";
const WORKERS: usize = 16;
/// Requests answered before the stop begins.
const BEFORE_STOP: i64 = 300;

async fn token_rows(app: &TestApp) -> i64 {
    let (count,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM audit_log WHERE action = 'token_api.token' AND actor = 'service:svc_notes'",
    )
    .fetch_one(app.state.store.pool())
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
