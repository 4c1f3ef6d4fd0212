//! A 2026-07-28 retry that wakes while the provider callback records the asking client's consent.
//! The callback used to mark the authorization `completed` before it recorded the consent, so a
//! retry that read the row in between found a connection its client could not use yet and answered
//! a second, consent-only link instead of the provider's answer (seen first with the Python SDK's
//! client on PostgreSQL). Both now commit together (`Authorizations::complete_connect`). Here the
//! window is held open on purpose, by locking the consents table against writes while the callback
//! runs: the retry must still get the provider's answer.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Connection;
use tokio::sync::{mpsc, watch};

use crate::helpers::round_trips::{ME, URL_AND_FORMS, answer_in, browser_until_callback, link_and_state, request_2026};
use crate::helpers::*;

/// The progress count of an SSE chunk's notifications, if any.
fn progress_in(chunk: &str) -> Option<u64> {
    chunk
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .filter(|message| message["method"] == "notifications/progress")
        .filter_map(|message| message["params"]["progress"].as_f64())
        .map(|progress| progress as u64)
        .max()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_that_wakes_while_the_callback_records_the_consent_gets_the_providers_answer() {
    let Some(app) = spawn_app(Backend::Postgres).await else { return };
    let alice = app.token_for(ALICE).await;
    let first = request_2026(&app, &alice, "provider_request", ME(), URL_AND_FORMS(), None, None).send().await.unwrap();
    let (url, state) = link_and_state(&answer_in(&first.text().await.unwrap()).unwrap());

    // The retry, waiting with progress (every 200 ms in tests): a reader keeps the latest count
    // and hands over the rest of the stream.
    let accepted = json!({"authorize": {"action": "accept"}});
    let mut retry =
        request_2026(&app, &alice, "provider_request", ME(), URL_AND_FORMS(), Some((accepted, &state)), Some("w"))
            .send()
            .await
            .unwrap();
    let (ticks, mut tick) = watch::channel(0u64);
    let (body, mut received) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Ok(Some(chunk)) = retry.chunk().await {
            let chunk = String::from_utf8_lossy(&chunk).into_owned();
            if let Some(count) = progress_in(&chunk) {
                ticks.send_replace(count);
            }
            let _ = body.send(chunk);
        }
    });
    tick.wait_for(|count| *count >= 1).await.unwrap();
    let browser = app.browser();
    let callback_url = browser_until_callback(&app, &browser, &url).await;

    // Hold the consent write: reads of the table go on, writes wait for this transaction.
    let mut lock = sqlx::AnyConnection::connect(&app.database_url).await.unwrap();
    let mut holding = lock.begin().await.unwrap();
    sqlx::query("LOCK TABLE client_consents IN EXCLUSIVE MODE").execute(&mut *holding).await.unwrap();
    let callback = tokio::spawn({
        let browser = browser.clone();
        async move { browser.get(&callback_url).send().await.unwrap().status() }
    });
    // The callback is stuck on the lock once another session of this database waits for one.
    let watcher = sqlx::any::AnyPoolOptions::new().max_connections(1).connect(&app.database_url).await.unwrap();
    eventually("the callback waits on the consents lock", Duration::from_secs(20), || {
        let watcher = watcher.clone();
        async move {
            let (waiting,): (i64,) = sqlx::query_as(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
            )
            .fetch_one(&watcher)
            .await
            .unwrap();
            waiting > 0
        }
    })
    .await;
    // Three more ticks: the waiting retry has read the row at least twice since (it reads it
    // after each tick), or it answered meanwhile.
    let now = *tick.borrow();
    let _ = tokio::time::timeout(Duration::from_secs(20), tick.wait_for(|count| *count >= now + 3)).await;
    holding.commit().await.unwrap();
    assert_eq!(callback.await.unwrap(), 303, "the callback finishes once the lock is gone");

    let mut seen = String::new();
    let answer = loop {
        if let Some(answer) = answer_in(&seen) {
            break answer;
        }
        let chunk = tokio::time::timeout(Duration::from_secs(40), received.recv()).await;
        seen.push_str(&chunk.expect("an answer").expect("the stream goes on until the answer"));
    };
    assert_ne!(answer["result"]["resultType"], "input_required", "no second link: {answer}");
    assert_eq!(answer["result"]["structuredContent"]["status"], 200, "{answer}");
    app.stop().await;
}
