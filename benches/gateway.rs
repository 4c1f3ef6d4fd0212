//! What the gateway adds to a tool call (issue 26, item 8): the same tool on the same server,
//! called directly and through the broker, in the same run.
//!
//! The server is `examples/upstream_server.rs` in its own process, open (it checks nothing, so
//! the figures are the broker's cost alone, not the server's token check). It is registered
//! behind the real app (`spawn_app`, port 0 on 127.0.0.1; SQLite) with `provider` auth (the
//! demo provider, scope `profile`), so every forwarded call takes the user's token, checks the
//! client's consent, injects the credential, forwards over the user's own connection, audits
//! and counts. Each user connects through the real browser flow first.
//!
//! Then, for 1 and for 64 users (64 distinct users, each with their own MCP session and HTTP
//! connection, on each side), interleaved over `ROUNDS` rounds of `BUDGET` each, each user
//! calls `echo` in a loop:
//!   (a) directly: an rmcp client (2025-11-25 session) at the server's `/mcp`;
//!   (b) through the broker: an rmcp client at the broker's `/mcp`, tool `bench_echo`.
//!   (c) through a bare rmcp proxy in the same process as the broker: an rmcp server
//!       (2025-11-25 sessions, as the broker's) whose every `tools/call` is sent on by an rmcp
//!       client of its own to the same server, one per session as the broker holds one per user,
//!       and nothing else — no token, consent, credential, audit or metrics. What two rmcp hops
//!       cost on this machine, the floor under (b) with this stack.
//! Medians of the rounds are reported: p50, p99, the added latency (b − a) and the throughput
//! ratio (b / a), and the same for (c); (b − c) is what the broker's gates add to a bare proxy.
//! Goals: added p50 ≤ 0.3 ms, throughput ≥ 0.5× direct.
//! `cargo bench --bench gateway` (it builds the example with it:
//! `cargo build --release --bench gateway --example upstream_server` builds both at once).

// The shipped binary allocates with jemalloc (`src/main.rs`); the app measured here in the
// bench's process does too, so its figures are the binary's.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

// tests/api/helpers/ is the test harness; a bench uses only part of it.
#[allow(dead_code, unused_macros, unused_imports)]
#[path = "../tests/api/helpers/mod.rs"]
mod helpers;

use std::sync::Arc;
use std::time::{Duration, Instant};

use helpers::{ALICE, Backend, ClientKind, McpClient, PASSWORD, TestApp, mcp_client_at, spawn_app};
use oauth_broker::domain::gateway::{CredentialHeader, CredentialScheme, ServerName};
use oauth_broker::domain::{ProviderId, Scopes};
use oauth_broker::identity::password;
use oauth_broker::store::gateway::{GatewayAuth, GatewayServerRow};
use rmcp::model::{CallToolRequestParams, CallToolResponse, ErrorData, ServerCapabilities, ServerConfig};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleClient, RoleServer, ServerHandler, ServiceExt};
use secrecy::SecretString;
use serde_json::json;
use tokio::io::AsyncBufReadExt;

/// (c): an rmcp server that passes each tool call on over an rmcp client of its own.
struct BareProxy {
    upstream_url: Arc<str>,
    /// This session's client of the server, opened by its first call.
    client: tokio::sync::OnceCell<RunningService<RoleClient, ()>>,
}

impl ServerHandler for BareProxy {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let client = self
            .client
            .get_or_try_init(|| ().serve(StreamableHttpClientTransport::from_uri(self.upstream_url.to_string())))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        client.peer().call_tool_once(request).await.map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }
}

/// Serves [`BareProxy`] on 127.0.0.1 (TCP_NODELAY, as the broker's listener); its MCP URL.
async fn start_bare_proxy(upstream_url: &str) -> String {
    let upstream_url: Arc<str> = upstream_url.into();
    let service = StreamableHttpService::new(
        move || Ok(BareProxy { upstream_url: upstream_url.clone(), client: tokio::sync::OnceCell::new() }),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().route_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, router).await });
    url
}

const USERS: [usize; 2] = [1, 64];
const ROUNDS: usize = 3;
const BUDGET: Duration = Duration::from_secs(5);
const WARM_UP: usize = 50;

struct Run {
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

/// One `echo` call; panics on a wrong answer, since a fast error would flatter the numbers.
async fn echo(client: &McpClient, tool: &str) {
    let result = client.call(tool, json!({"text": "hi"})).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(result.structured_content.as_ref().unwrap()["text"], "hi", "{result:?}");
}

/// Every client calls `tool` in a loop for `budget`, each on its own task.
async fn run(clients: &[Arc<McpClient>], tool: &'static str, budget: Duration) -> Run {
    let start = Instant::now();
    let workers: Vec<_> = clients
        .iter()
        .map(|client| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while start.elapsed() < budget {
                    let sent = Instant::now();
                    echo(&client, tool).await;
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

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn micros(seconds: f64) -> String {
    format!("{:.0} µs", seconds * 1e6)
}

/// `examples/upstream_server` of this build (beside the bench: `target/release/examples`), or
/// `UPSTREAM_SERVER`.
fn upstream_binary() -> std::path::PathBuf {
    if let Ok(path) = std::env::var("UPSTREAM_SERVER") {
        return path.into();
    }
    let bench = std::env::current_exe().unwrap();
    let profile_dir = bench.parent().and_then(|deps| deps.parent()).unwrap();
    let path = profile_dir.join("examples").join("upstream_server");
    assert!(
        path.exists(),
        "{} is missing: cargo build --release --bench gateway --example upstream_server",
        path.display()
    );
    path
}

/// Starts the server; returns it and its MCP URL.
async fn start_upstream() -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(upstream_binary())
        .args(["--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next_line().await.unwrap().expect("`listening on http://ADDR`");
    let base = first.strip_prefix("listening on ").unwrap().to_owned();
    // Keep reading its stdout so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, format!("{base}/mcp"))
}

/// Registers the server as `bench` with provider auth and waits until the app lists it.
async fn register(app: &TestApp, url: &str) {
    let now = app.now();
    let name = ServerName::parse("bench").unwrap();
    let row = GatewayServerRow {
        id: uuid::Uuid::new_v4().simple().to_string(),
        prefix: name.default_prefix(),
        name,
        url: url.parse().unwrap(),
        auth: GatewayAuth::Provider {
            provider: ProviderId::demo(),
            scopes: Scopes::from_space_separated("profile").unwrap(),
            header: CredentialHeader::authorization(),
            scheme: CredentialScheme::bearer(),
        },
        created_at: now,
        updated_at: now,
    };
    app.state.core.store.gateway_servers().create(&row).await.unwrap();
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let tools = client.peer().list_all_tools().await.unwrap();
        if tools.iter().any(|t| t.name.starts_with("bench_")) {
            break;
        }
        assert!(Instant::now() < deadline, "the broker did not pick up the server");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.close().await;
}

/// `name`'s client of the broker, connected to the server through the broker's link and the
/// browser (once per user). The first user's call is the connect tool (the server's tools are
/// not known yet), every other user's is `bench_echo`.
async fn connected_client(app: &TestApp, name: &str, first: bool) -> McpClient {
    let client = app.mcp_client(name, ClientKind::Url).await;
    let tool = if first { "bench_connect" } else { "bench_echo" };
    let url = match client.call(tool, json!({"text": "hi"})).await {
        Err(rmcp::ServiceError::McpError(error)) if error.code.0 == -32042 => {
            error.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned()
        }
        other => panic!("expected the broker's link, got {other:?}"),
    };
    let landed = app.approve_in_browser_as(&app.browser(), &url, name, &format!("{name}-demo")).await;
    assert_eq!(landed.status(), 200);
    let connected = client.call(tool, json!({"text": "hi"})).await.unwrap();
    assert_ne!(connected.is_error, Some(true), "{connected:?}");
    client
}

#[tokio::main]
async fn main() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let (mut upstream, upstream_url) = start_upstream().await;
    register(&app, &upstream_url).await;

    let most = USERS.iter().copied().max().unwrap_or(1);
    let hash = password::hash_password(&SecretString::from(PASSWORD.to_string())).unwrap();
    let mut names = vec![ALICE.to_owned()];
    for i in 1..most {
        let name = format!("user{i:02}");
        app.state
            .core
            .store
            .users()
            .create_local(&app.state.core.config.issuer(), &name, &hash, app.now())
            .await
            .unwrap();
        names.push(name);
    }
    let proxy_url = start_bare_proxy(&upstream_url).await;
    let mut direct = Vec::new();
    let mut brokered = Vec::new();
    let mut proxied = Vec::new();
    for (i, name) in names.iter().enumerate() {
        brokered.push(Arc::new(connected_client(&app, name, i == 0).await));
        // The server is open: the direct client's token is never checked, nor the proxy's.
        direct.push(Arc::new(mcp_client_at(&upstream_url, "unused", ClientKind::Url).await.unwrap()));
        proxied.push(Arc::new(mcp_client_at(&proxy_url, "unused", ClientKind::Url).await.unwrap()));
    }
    for ((d, b), c) in direct.iter().zip(&brokered).zip(&proxied) {
        for _ in 0..WARM_UP {
            echo(d, "echo").await;
            echo(b, "bench_echo").await;
            echo(c, "echo").await;
        }
    }

    println!(
        "\nSQLite, {ROUNDS} interleaved rounds of {}s, medians; echo on examples/upstream_server",
        BUDGET.as_secs()
    );
    for users in USERS {
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            a.push(run(&direct[..users], "echo", BUDGET).await);
            b.push(run(&brokered[..users], "bench_echo", BUDGET).await);
            c.push(run(&proxied[..users], "echo", BUDGET).await);
        }
        let summary = |runs: &[Run]| {
            (
                median(runs.iter().map(|r| r.per_second).collect()),
                median(runs.iter().map(|r| r.p50.as_secs_f64()).collect()),
                median(runs.iter().map(|r| r.p99.as_secs_f64()).collect()),
            )
        };
        let (a_rate, a_p50, a_p99) = summary(&a);
        let (b_rate, b_p50, b_p99) = summary(&b);
        let (c_rate, c_p50, c_p99) = summary(&c);
        println!("\n{users} user(s), each with their own connection");
        println!("{:<24} {:>9} {:>10} {:>10}", "case", "calls/s", "p50", "p99");
        println!("{:<24} {a_rate:>9.0} {:>10} {:>10}", "(a) direct", micros(a_p50), micros(a_p99));
        println!("{:<24} {b_rate:>9.0} {:>10} {:>10}", "(b) through the broker", micros(b_p50), micros(b_p99));
        println!("{:<24} {c_rate:>9.0} {:>10} {:>10}", "(c) bare rmcp proxy", micros(c_p50), micros(c_p99));
        println!(
            "added: p50 {} (goal <= 300 µs), p99 {}; throughput {:.2}x direct (goal >= 0.50x)",
            micros(b_p50 - a_p50),
            micros(b_p99 - a_p99),
            b_rate / a_rate
        );
        println!(
            "bare proxy: added p50 {}, p99 {}; throughput {:.2}x direct; the broker's gates over it: p50 {}, \
             throughput {:.2}x the bare proxy",
            micros(c_p50 - a_p50),
            micros(c_p99 - a_p99),
            c_rate / a_rate,
            micros(b_p50 - c_p50),
            b_rate / c_rate
        );
    }
    println!("\naudit queue high-water mark: {} events", app.state.core.store.audit_queue().peak());
    for client in direct.into_iter().chain(brokered).chain(proxied) {
        if let Ok(client) = Arc::try_unwrap(client) {
            client.close().await;
        }
    }
    let _ = upstream.kill().await;
    app.stop().await;
}
