//! How long a 2026-07-28 round trip takes, for the notes: the first answer (the
//! `InputRequiredResult` with the link) and the retry's wait after the browser comes back (from
//! the provider callback's 303 to the retry's answer). Plain HTTP, a fresh app per run, on both
//! backends. A measurement, not a check: ignored by default, run with
//! `cargo test --test api mcp::round_trip_timings -- --ignored --nocapture`.

use std::time::Instant;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::helpers::round_trips::{ME, URL_AND_FORMS, answer_in, browser_until_callback, link_and_state, request_2026};
use crate::helpers::*;

const RUNS: usize = 20;

/// One run's figures, in milliseconds.
struct Run {
    /// From sending the first call to its whole answer.
    first_answer: f64,
    /// From the callback's 303 reaching the browser to the retry's answer reaching the client;
    /// below zero when the answer came first (the broker signals before it redirects).
    after_303: f64,
    /// From the browser sending the callback request to the retry's answer.
    after_callback_sent: f64,
}

fn millis_between(from: Instant, to: Instant) -> f64 {
    match to.checked_duration_since(from) {
        Some(later) => later.as_secs_f64() * 1e3,
        None => -(from.duration_since(to).as_secs_f64() * 1e3),
    }
}

async fn one_run(backend: Backend) -> Option<Run> {
    // The test apps send progress every 200 ms: the first tells the test the retry is waiting
    // before it lets the browser come back.
    let app = spawn_app(backend).await?;
    let alice = app.token_for(ALICE).await;
    let caps = URL_AND_FORMS();
    // Warm the app (key, caches, pool) with a call that needs no user.
    request_2026(&app, &alice, "list_connections", json!({}), caps.clone(), None, None).send().await.unwrap();

    let started = Instant::now();
    let response = request_2026(&app, &alice, "provider_request", ME(), caps.clone(), None, None).send().await.unwrap();
    let first = answer_in(&response.text().await.unwrap()).unwrap();
    let first_answer = started.elapsed().as_secs_f64() * 1e3;
    let (url, state) = link_and_state(&first);

    // The retry, read chunk by chunk with each chunk's arrival time.
    let accepted = json!({"authorize": {"action": "accept"}});
    let mut retry = request_2026(&app, &alice, "provider_request", ME(), caps, Some((accepted, &state)), Some("t"))
        .send()
        .await
        .unwrap();
    let (chunks, mut arrived) = mpsc::unbounded_channel::<(Instant, String)>();
    tokio::spawn(async move {
        while let Ok(Some(chunk)) = retry.chunk().await {
            let _ = chunks.send((Instant::now(), String::from_utf8_lossy(&chunk).into_owned()));
        }
    });
    let browser = app.browser();
    let callback_url = browser_until_callback(&app, &browser, &url).await;
    let mut seen = String::new();
    while !seen.contains("notifications/progress") {
        seen.push_str(&arrived.recv().await.expect("the retry waits").1);
    }
    let callback_sent = Instant::now();
    let callback = browser.get(&callback_url).send().await.unwrap();
    let at_303 = Instant::now();
    assert_eq!(callback.status(), 303);
    let (answered_at, answer): (Instant, Value) = loop {
        let (at, chunk) = arrived.recv().await.expect("the retry's answer");
        seen.push_str(&chunk);
        if let Some(answer) = answer_in(&seen) {
            break (at, answer);
        }
    };
    assert_eq!(answer["result"]["structuredContent"]["status"], 200, "{answer}");
    app.stop().await;
    Some(Run {
        first_answer,
        after_303: millis_between(at_303, answered_at),
        after_callback_sent: millis_between(callback_sent, answered_at),
    })
}

fn percentile(sorted: &[f64], p: usize) -> f64 {
    // Nearest rank: the smallest value with at least p% of the runs at or below it.
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted[rank - 1]
}

fn report(backend: Backend, what: &str, mut figures: Vec<f64>) {
    figures.sort_by(f64::total_cmp);
    println!(
        "{backend:?} {what}: p50 {:.1} ms, p99 {:.1} ms (min {:.1}, max {:.1}, {} runs)",
        percentile(&figures, 50),
        percentile(&figures, 99),
        figures[0],
        figures[figures.len() - 1],
        figures.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement for the notes, not a check: run with --ignored --nocapture"]
async fn round_trip_timings() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let mut runs = Vec::new();
        for _ in 0..RUNS {
            match one_run(backend).await {
                Some(run) => runs.push(run),
                None => break,
            }
        }
        if runs.is_empty() {
            continue;
        }
        report(backend, "first answer (InputRequiredResult)", runs.iter().map(|r| r.first_answer).collect());
        report(backend, "retry's answer after the callback's 303", runs.iter().map(|r| r.after_303).collect());
        report(
            backend,
            "retry's answer after the callback was sent",
            runs.iter().map(|r| r.after_callback_sent).collect(),
        );
    }
}
