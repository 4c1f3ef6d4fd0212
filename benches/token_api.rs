//! Token requests per second on a ready grant, side by side with a bare axum JSON handler.
//!
//! The real app runs as the API tests run it (`spawn_app`, port 0 on 127.0.0.1; SQLite, or
//! PostgreSQL with `TOKEN_BENCH_BACKEND=postgres` and `TEST_POSTGRES_URL`); a service is
//! registered and alice connects the demo provider through the token API and the real browser
//! flow. Then, for 16 and for 64 concurrent workers (each its own connection), interleaved over
//! `ROUNDS` rounds of `BUDGET` each:
//!   (a) baseline: POST the same JSON body with the same Basic header to a bare axum handler
//!       that parses it and answers JSON (the HTTP + JSON ceiling on this machine);
//!   (b) POST /v1/tokens (service auth, budget, user token, consent, grant, unsealing, audit);
//!   (c) RFC 8693 token exchange at POST /token;
//!   (d) GET /v1/proxy/demo/me: (b)'s checks, then the call to the demo provider;
//!   (e) GET the demo provider's /me directly with the token: the provider call alone, so
//!       (d) less (e) is what the proxy adds.
//! Medians of the rounds are reported, as ratios of (a); and the audit queue's high-water mark
//! (what a kill -9 at the worst moment would have lost). `TOKEN_BENCH_SUSTAIN=N` then runs
//! (b) alone for N seconds in 10-second rounds, to show whether it declines over time.
//! Last, the latency at fixed rates (`TOKEN_BENCH_RATES`, default `1000,3000` requests a
//! second, over 16 connections): requests are sent on a schedule, not when the previous one
//! answered, and each latency counts from when its request was due, so a stall is paid by
//! every request it delayed (no coordinated omission). A pacer thread walks the schedule with
//! `std::thread::sleep` (high-resolution timers; tokio's own timer has millisecond steps, which
//! put up to a millisecond of the sender's lateness into every figure) and hands each request
//! to the runtime as it falls due; what lateness is left is in (a)'s figures too.
//! `cargo bench --bench token_api`, or `bench/run.sh --token-api` (both backends).

// The shipped binary allocates with jemalloc (`src/main.rs`); the app measured here in the
// bench's process does too, so its figures are the binary's (the bare handler's as well).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

// tests/api/helpers/ is the test harness; a bench uses only part of it.
#[allow(dead_code, unused_macros, unused_imports)]
#[path = "../tests/api/helpers/mod.rs"]
mod helpers;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use axum::Json;
use axum::routing::post;
use helpers::{ALICE, Backend, SpawnOptions, spawn_app_opts};
use oauth_broker::crypto::OneTimeSecret;
use oauth_broker::domain::ProviderId;
use oauth_broker::store::token_api::NewService;
use serde_json::{Value, json};

const CONNECTIONS: [usize; 2] = [16, 64];
const ROUNDS: usize = 3;
const BUDGET: Duration = Duration::from_secs(5);
const RESOURCE: &str = "https://tools.example/mcp";

/// One kind of request; panics on a wrong answer, since a fast error would flatter the numbers.
/// Bodies are encoded once, as wrk sends fixed bytes: the load generator shares the machine's
/// cores with the server, and encoding a form (the exchange's subject token, byte by byte) on
/// every request cost it more than the JSON of the other cases, which the exchange's figure paid.
#[derive(Clone)]
enum Case {
    Json {
        url: String,
        body: bytes::Bytes,
    },
    Form {
        url: String,
        form: bytes::Bytes,
    },
    /// A GET answered with 200 (the proxy, or the provider itself).
    Get {
        url: String,
        headers: Vec<(&'static str, String)>,
        basic: bool,
    },
}

#[derive(Clone)]
struct Request {
    http: reqwest::Client,
    client_id: String,
    secret: String,
    case: Case,
}

impl Request {
    async fn send(&self) {
        let builder = match &self.case {
            Case::Json { url, body } => {
                self.http.post(url).header(reqwest::header::CONTENT_TYPE, "application/json").body(body.clone())
            }
            Case::Form { url, form } => self
                .http
                .post(url)
                .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(form.clone()),
            Case::Get { url, headers, basic } => {
                let mut builder = self.http.get(url);
                for (name, value) in headers {
                    builder = builder.header(*name, value);
                }
                if !basic {
                    let response = builder.send().await.unwrap();
                    assert_eq!(response.status(), 200);
                    response.bytes().await.unwrap();
                    return;
                }
                builder
            }
        };
        let response = builder.basic_auth(&self.client_id, Some(&self.secret)).send().await.unwrap();
        assert_eq!(response.status(), 200);
        if let Case::Get { .. } = self.case {
            response.bytes().await.unwrap();
            return;
        }
        let body: Value = response.json().await.unwrap();
        assert!(body["access_token"].as_str().is_some_and(|t| !t.is_empty()), "{body}");
    }
}

struct Run {
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

/// `tasks` workers, each with its own connection, for `budget`.
async fn run(request: &Request, tasks: usize, budget: Duration) -> Run {
    let start = Instant::now();
    let workers: Vec<_> = (0..tasks)
        .map(|_| {
            // One connection per worker, as a tool server's pool would hold.
            let request = Request { http: reqwest::Client::new(), ..request.clone() };
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while start.elapsed() < budget {
                    let sent = Instant::now();
                    request.send().await;
                    latencies.push(sent.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await.unwrap());
    }
    let total = start.elapsed();
    latencies.sort_unstable();
    let at = |p: usize| latencies[(latencies.len() - 1) * p / 100];
    Run { per_second: latencies.len() as f64 / total.as_secs_f64(), p50: at(50), p99: at(99) }
}

/// Requests a second, sent on a fixed schedule over `connections` connections for `budget`;
/// each latency counts from the moment its request was due. `None` when the requests waiting
/// passed what the schedule could ever catch up with (the rate is beyond this machine).
async fn at_fixed_rate(request: &Request, rate: u32, connections: usize, budget: Duration) -> Option<Run> {
    const MAX_OUTSTANDING: usize = 4096;
    let clients: Vec<Request> =
        (0..connections).map(|_| Request { http: reqwest::Client::new(), ..request.clone() }).collect();
    let interval = Duration::from_secs(1) / rate;
    let total = u32::try_from((budget.as_secs_f64() * f64::from(rate)) as u64).unwrap_or(u32::MAX);
    let start = Instant::now();
    let (due_now, mut falling_due) = tokio::sync::mpsc::unbounded_channel();
    // Ends when the schedule does, or when the receiver is dropped (the rate was given up).
    let pacer = std::thread::spawn(move || {
        for i in 0..total {
            let due = start + interval * i;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            if due_now.send((i, due)).is_err() {
                return;
            }
        }
    });
    let mut sent = tokio::task::JoinSet::new();
    let mut latencies = Vec::with_capacity(total as usize);
    while let Some((i, due)) = falling_due.recv().await {
        // What has answered is collected as we go: what is left is what is still waiting.
        while let Some(latency) = sent.try_join_next() {
            latencies.push(latency.unwrap());
        }
        if sent.len() >= MAX_OUTSTANDING {
            sent.abort_all();
            drop(falling_due);
            pacer.join().unwrap();
            return None;
        }
        let client = clients[i as usize % connections].clone();
        sent.spawn(async move {
            client.send().await;
            due.elapsed()
        });
    }
    pacer.join().unwrap();
    while let Some(latency) = sent.join_next().await {
        latencies.push(latency.unwrap());
    }
    let elapsed = start.elapsed();
    latencies.sort_unstable();
    let at = |p: usize| latencies[(latencies.len() - 1) * p / 100];
    Some(Run { per_second: latencies.len() as f64 / elapsed.as_secs_f64(), p50: at(50), p99: at(99) })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn micros(seconds: f64) -> String {
    format!("{:.0} µs", seconds * 1e6)
}

/// A bare axum handler: parse the JSON body, answer a token-shaped JSON body.
async fn bare_axum() -> String {
    async fn handler(Json(body): Json<Value>) -> Json<Value> {
        Json(json!({"access_token": "x".repeat(40), "token_type": "Bearer", "provider": body["provider"]}))
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let router = axum::Router::new().route("/v1/tokens", post(handler));
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{address}/v1/tokens")
}

#[tokio::main]
async fn main() {
    let backend = match std::env::var("TOKEN_BENCH_BACKEND").as_deref() {
        Ok("postgres") => Backend::Postgres,
        _ => Backend::Sqlite,
    };
    // A budget this run never reaches (the app's clock stands still): the budget's shares are
    // still leased and counted, as for any service.
    let options = SpawnOptions { toml: "[token_api]\nrequests_per_minute = 4000000000\n".into(), ..Default::default() };
    let app =
        spawn_app_opts(backend, options, |builder| builder).await.expect("TEST_POSTGRES_URL for the postgres run");
    // A registered tool server and alice's token for it.
    let secret = OneTimeSecret::generate("obs_", 32);
    let providers: BTreeSet<ProviderId> = [ProviderId::demo()].into();
    let resource = url::Url::parse(RESOURCE).unwrap();
    let new = NewService {
        name: "bench",
        providers: &providers,
        resource: Some(&resource),
        proxy_only: false,
        trusted: false,
        secret_hash: secret.hash(),
        organization: &oauth_broker::domain::OrganizationId::default_organization(),
    };
    app.state.core.store.services().create(&new, app.now()).await.unwrap();
    let user = app.state.core.store.users().by_username(ALICE).await.unwrap().unwrap();
    let token =
        app.state.identity.keys.issue_for_audience(&user.subject, None, None, RESOURCE, app.now(), 3600).unwrap();
    let http = reqwest::Client::new();
    let body = json!({"subject_token": token, "provider": "demo"});

    // Connect through the API and the browser, so the grant is ready and this service allowed.
    let first = http
        .post(app.url("/v1/tokens"))
        .basic_auth("svc_bench", Some(secret.expose_plaintext()))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 409);
    let problem: Value = first.json().await.unwrap();
    app.approve_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;

    let request = |case: Case| Request {
        http: http.clone(),
        client_id: "svc_bench".into(),
        secret: secret.expose_plaintext().to_owned(),
        case,
    };
    let issued: Value = http
        .post(app.url("/v1/tokens"))
        .basic_auth("svc_bench", Some(secret.expose_plaintext()))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let provider_token = issued["access_token"].as_str().unwrap().to_owned();
    let json = bytes::Bytes::from(serde_json::to_vec(&body).unwrap());
    let form = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"),
            ("subject_token", token.as_str()),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:access_token"),
            ("provider", "demo"),
        ])
        .finish();
    let cases: Vec<(&str, Request)> = vec![
        ("(a) bare axum JSON handler", request(Case::Json { url: bare_axum().await, body: json.clone() })),
        ("(b) POST /v1/tokens", request(Case::Json { url: app.url("/v1/tokens"), body: json.clone() })),
        ("(c) token exchange at /token", request(Case::Form { url: app.url("/token"), form: form.into() })),
        (
            "(d) GET /v1/proxy/demo/me",
            request(Case::Get {
                url: app.url("/v1/proxy/demo/me"),
                headers: vec![("x-subject-token", token.clone())],
                basic: true,
            }),
        ),
        (
            "(e) the demo provider's /me",
            request(Case::Get {
                url: app.url("/demo-provider/api/me"),
                headers: vec![("authorization", format!("Bearer {provider_token}"))],
                basic: false,
            }),
        ),
    ];
    for (_, request) in &cases {
        for _ in 0..200 {
            request.send().await;
        }
    }
    println!("\n{backend:?}, {ROUNDS} interleaved rounds of {}s, medians", BUDGET.as_secs());
    for tasks in CONNECTIONS {
        let mut runs: Vec<Vec<Run>> = cases.iter().map(|_| Vec::new()).collect();
        for _ in 0..ROUNDS {
            for (i, (_, request)) in cases.iter().enumerate() {
                runs[i].push(run(request, tasks, BUDGET).await);
            }
        }
        println!("\n{tasks} connections");
        println!("{:<32} {:>9} {:>10} {:>10} {:>8}", "case", "req/s", "p50", "p99", "ratio");
        let baseline = median(runs[0].iter().map(|r| r.per_second).collect());
        for ((name, _), runs) in cases.iter().zip(&runs) {
            let per_second = median(runs.iter().map(|r| r.per_second).collect());
            let p50 = median(runs.iter().map(|r| r.p50.as_secs_f64()).collect());
            let p99 = median(runs.iter().map(|r| r.p99.as_secs_f64()).collect());
            println!(
                "{name:<32} {per_second:>9.0} {:>10} {:>10} {:>7.2}x",
                micros(p50),
                micros(p99),
                per_second / baseline
            );
        }
    }
    let rates: Vec<u32> = std::env::var("TOKEN_BENCH_RATES")
        .unwrap_or_else(|_| "1000,3000".into())
        .split(',')
        .map(|r| r.trim().parse().expect("TOKEN_BENCH_RATES: numbers of requests a second, e.g. 1000,3000"))
        .collect();
    println!("\nfixed rates over 16 connections, 5 s each, latency from when each request was due");
    println!("{:<32} {:>7} {:>10} {:>10}", "case", "rate/s", "p50", "p99");
    for rate in rates {
        // The provider alone (e) is left out: (d) less the provider is what the proxy adds.
        for (name, request) in &cases[..4] {
            match at_fixed_rate(request, rate, 16, BUDGET).await {
                Some(run) => println!(
                    "{name:<32} {rate:>7} {:>10} {:>10}",
                    micros(run.p50.as_secs_f64()),
                    micros(run.p99.as_secs_f64())
                ),
                None => println!("{name:<32} {rate:>7} {:>10} {:>10}", "overload", "-"),
            }
        }
    }
    println!("\naudit queue high-water mark: {} events", app.state.core.store.audit_queue().peak());
    if let Some(seconds) = std::env::var("TOKEN_BENCH_SUSTAIN").ok().and_then(|s| s.parse::<u64>().ok()) {
        println!("\n(b) alone at 16 connections for {seconds}s, 10-second rounds:");
        for round in 0..seconds.div_ceil(10) {
            let result = run(&cases[1].1, 16, Duration::from_secs(10)).await;
            println!(
                "round {round:>3}: {:>9.0} req/s  p50 {:>8}  p99 {:>8}",
                result.per_second,
                micros(result.p50.as_secs_f64()),
                micros(result.p99.as_secs_f64())
            );
        }
    }
    app.stop().await;
}
