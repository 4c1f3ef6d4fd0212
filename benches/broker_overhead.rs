//! What the broker costs per provider call, measured in-process on loopback.
//!
//! The real app runs exactly as the API tests run it (`spawn_app(Backend::Sqlite)`, port 0 on
//! 127.0.0.1); alice connects the demo provider through the real browser flow. Then:
//!   (a) baseline: GET `/demo-provider/api/me` directly with the provider access token;
//!   (b) the same call as `provider_request GET /me` through an rmcp client;
//!   (c) `list_connections`, which never goes upstream (MCP + bearer + database only).
//! (b) − (a) is the broker's overhead: MCP framing, bearer check, grant lookup and unsealing,
//! and the extra HTTP hop. `cargo bench --bench broker_overhead`

// tests/api/helpers/ is the test harness; a bench uses only part of it.
#[allow(dead_code, unused_macros, unused_imports)]
#[path = "../tests/api/helpers/mod.rs"]
mod helpers;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use helpers::{ALICE, Backend, spawn_app};
use oauth_broker::crypto::SealContext;
use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

const SEQUENTIAL: usize = 2000;
const CONCURRENT: usize = 4000;
const TASKS: usize = 8;
const WARM_UP: usize = 200;
/// Each case stops here whatever its count, so the whole run stays well under two minutes.
const BUDGET: Duration = Duration::from_secs(20);

struct Stats {
    case: &'static str,
    total: Duration,
    latencies: Vec<Duration>,
}

impl Stats {
    fn new(case: &'static str, total: Duration, mut latencies: Vec<Duration>) -> Self {
        latencies.sort_unstable();
        Self { case, total, latencies }
    }

    fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.total.as_secs_f64()
    }

    fn percentile(&self, p: usize) -> Duration {
        let last = self.latencies.len().saturating_sub(1);
        self.latencies.get(last * p / 100).copied().unwrap_or_default()
    }
}

/// One request; panics on a wrong answer, since a fast error would flatter the numbers.
trait Request: Clone + Send + 'static {
    fn send(&self) -> impl Future<Output = ()> + Send;
}

#[derive(Clone)]
struct Direct {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Request for Direct {
    async fn send(&self) {
        let response = self.http.get(&self.url).bearer_auth(&self.token).send().await.unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
    }
}

#[derive(Clone)]
struct Tool {
    peer: rmcp::Peer<RoleClient>,
    name: &'static str,
    arguments: serde_json::Value,
}

impl Request for Tool {
    async fn send(&self) {
        let mut params = CallToolRequestParams::new(self.name);
        params.arguments = self.arguments.as_object().cloned();
        let result = self.peer.call_tool(params).await.unwrap();
        assert_ne!(result.is_error, Some(true), "{result:?}");
        if let Some(status) = result.structured_content.as_ref().and_then(|s| s.get("status")) {
            assert_eq!(status, 200);
        }
    }
}

async fn sequential(case: &'static str, request: &impl Request, count: usize) -> Stats {
    for _ in 0..WARM_UP {
        request.send().await;
    }
    let mut latencies = Vec::with_capacity(count);
    let start = Instant::now();
    while latencies.len() < count && start.elapsed() < BUDGET {
        let sent = Instant::now();
        request.send().await;
        latencies.push(sent.elapsed());
    }
    Stats::new(case, start.elapsed(), latencies)
}

/// `TASKS` workers share one counter, so the count is exact however the work spreads.
async fn concurrent(case: &'static str, request: &impl Request, count: usize) -> Stats {
    for _ in 0..WARM_UP {
        request.send().await;
    }
    let tickets = Arc::new(AtomicUsize::new(count));
    let start = Instant::now();
    let workers: Vec<_> = (0..TASKS)
        .map(|_| {
            let (request, tickets) = (request.clone(), tickets.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while start.elapsed() < BUDGET
                    && tickets.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok()
                {
                    let sent = Instant::now();
                    request.send().await;
                    latencies.push(sent.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(count);
    for worker in workers {
        latencies.extend(worker.await.unwrap());
    }
    Stats::new(case, start.elapsed(), latencies)
}

fn micros(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn print_table(rows: &[Stats]) {
    println!("\n{:<34} {:>8} {:>9} {:>9} {:>10} {:>10}", "case", "requests", "total", "req/s", "p50", "p95");
    for s in rows {
        println!(
            "{:<34} {:>8} {:>8.2}s {:>9.0} {:>10} {:>10}",
            s.case,
            s.latencies.len(),
            s.total.as_secs_f64(),
            s.per_second(),
            micros(s.percentile(50)),
            micros(s.percentile(95))
        );
    }
}

fn print_ratio(label: &str, broker: &Stats, direct: &Stats) {
    println!(
        "{label:<12} p50 {:.2}x ({} extra), p95 {:.2}x, throughput {:.2}x",
        broker.percentile(50).as_secs_f64() / direct.percentile(50).as_secs_f64(),
        micros(broker.percentile(50).saturating_sub(direct.percentile(50))),
        broker.percentile(95).as_secs_f64() / direct.percentile(95).as_secs_f64(),
        broker.per_second() / direct.per_second(),
    );
}

#[tokio::main]
async fn main() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client = app.connected_client(ALICE).await;

    // The provider token the broker holds for alice, so (a) makes the very request (b) makes.
    let user = app.user_id(ALICE).await;
    let grant = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
    let owner = format!("{user}/demo");
    let ctx = SealContext { table: "grants", column: "access_token", row_id: &grant.id, owner: &owner };
    let token = String::from_utf8(app.state.core.sealer.open(&grant.access_token_sealed, ctx).unwrap()).unwrap();

    let direct = Direct { http: app.http(), url: app.url("/demo-provider/api/me"), token };
    let through_broker = Tool {
        peer: client.peer().clone(),
        name: "provider_request",
        arguments: json!({"provider": "demo", "method": "GET", "path": "/me"}),
    };
    let list = Tool { peer: client.peer().clone(), name: "list_connections", arguments: json!({}) };

    let rows = vec![
        sequential("(a) direct GET /api/me, sequential", &direct, SEQUENTIAL).await,
        concurrent("(a) direct GET /api/me, 8 tasks", &direct, CONCURRENT).await,
        sequential("(b) provider_request, sequential", &through_broker, SEQUENTIAL).await,
        concurrent("(b) provider_request, 8 tasks", &through_broker, CONCURRENT).await,
        sequential("(c) list_connections, sequential", &list, SEQUENTIAL).await,
    ];
    print_table(&rows);
    println!("\n(b) / (a):");
    print_ratio("sequential", &rows[2], &rows[0]);
    print_ratio("8 tasks", &rows[3], &rows[1]);

    client.close().await;
    app.stop().await;
}
