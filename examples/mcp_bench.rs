//! The broker beside a bare rmcp echo server and the TypeScript SDK's echo server in one run
//! (issue 11); `bench/run.sh` builds everything in release mode, installs Node 22 and the SDK,
//! and runs this.
//!
//! ```text
//! mcp_bench --broker target/release/oauth-broker --echo target/release/examples/echo_server
//!           [--ts-node bench/.node/…/bin/node --ts-echo bench/ts-echo/server.mjs]
//!           [--rounds 3] [--seconds 5] [--sessions 10000] [--connects 20] [--starts 5]
//!           [--memory-only] [--only list_connections|provider_request] [--baseline-broker BIN]
//!           [--rates 1000,4000,8000] [--fixed-seconds 8] [--fixed-rate-only]
//! ```
//!
//! 1. Starts the servers on loopback; the broker as `serve --demo` on a fresh SQLite database,
//!    the TypeScript SDK echo server only when `--ts-node` and `--ts-echo` are given.
//! 2. Connects the demo provider through the real browser flow (`connect_account`, sign-in,
//!    consent, the demo provider's approval): once before the load (its ready grant), then
//!    `--connects` − 1 more accounts after it (step 2b, so that the load's user has one
//!    connection), timing callback → `notifications/elicitation/complete` at an rmcp client.
//! 3. wrk (`bench/mcp.lua`) against `echo`, `list_connections` and `provider_request` (a ready
//!    grant; the demo provider answers on loopback), interleaved over `--rounds` rounds: one
//!    session × 16 connections, then 64 sessions × 64 connections, after one unrecorded second
//!    per case (warm-up, mostly for Node's JIT). Medians; each case's req/s against the bare
//!    rmcp echo and, with the TypeScript server, against it (issue 11 asks `list_connections`
//!    ≥ 3× the TypeScript SDK echo). With `--baseline-broker`, that build's two tools run in the
//!    same rounds (on a database of its own, its grant made through the same flow), and the
//!    report gives this build's rate as a multiple of the baseline's.
//!
//!    Then (step 3b) latency at fixed offered rates (`--rates`): open loop, 64 connections
//!    over 64 sessions, requests sent on a schedule and timed from their scheduled send time
//!    (no coordinated omission; `mcp_bench/fixed_rate.rs`), for every server at the same
//!    rates: answered req/s, p50/p99/p99.9, errors, the server's CPU per call, and whether it
//!    kept up. A saturated closed loop's p99 (above) is its throughput restated (mean latency
//!    = connections / throughput); this one is latency at a load every server can carry.
//! 4. Per-session memory: RSS before and with `--sessions` sessions each holding its GET
//!    stream open, and after they are closed (DELETE) — for every server; then, for the broker,
//!    after as many sessions were left without DELETE and expired (`mcp_session_idle`, 10 s
//!    here). The broker's "with sessions" is read once they are all parked (idle, without an
//!    rmcp service: `mcp_session_park`, 1 s here, 10 s by default); the baseline broker's too.
//! 5. Cold start to ready (`/readyz` 200) on the existing database, `--starts` times.
//!
//! `--memory-only` runs step 4 alone (no browser flow, no wrk, no restarts), to iterate on
//! per-session memory in a minute; `--only TOOL` runs step 3 for that tool (and the echo servers)
//! alone, to profile it; `--fixed-rate-only` runs step 3b alone (with `--only`, for that tool).

#[path = "mcp_bench/fixed_rate.rs"]
mod fixed_rate;
#[path = "mcp_bench/flow.rs"]
mod flow;
#[path = "mcp_bench/mcp.rs"]
mod mcp;
#[path = "mcp_bench/procs.rs"]
mod procs;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use futures::StreamExt;
use serde_json::{Value, json};

use mcp::Endpoint;
use procs::Server;

#[derive(Parser)]
#[command(
    about = "oauth-broker beside bare rmcp and TypeScript SDK echo servers: throughput, latency, memory, start-up"
)]
struct Args {
    /// The broker binary (release build).
    #[arg(long)]
    broker: PathBuf,
    /// The bare rmcp echo server (`examples/echo_server.rs`, release build).
    #[arg(long)]
    echo: PathBuf,
    /// Node 22, to run the TypeScript SDK echo server (with `--ts-echo`).
    #[arg(long, requires = "ts_echo")]
    ts_node: Option<PathBuf>,
    /// The TypeScript SDK echo server (`bench/ts-echo/server.mjs`, with `--ts-node`).
    #[arg(long, requires = "ts_node")]
    ts_echo: Option<PathBuf>,
    /// The wrk script.
    #[arg(long, default_value = "bench/mcp.lua")]
    script: PathBuf,
    /// Interleaved rounds per load case (medians are reported).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seconds of load per case and round.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Idle sessions held open (with their GET streams) for the memory figure.
    #[arg(long, default_value_t = 10_000)]
    sessions: usize,
    /// Connections made through the browser flow (callback → completion latency).
    #[arg(long, default_value_t = 20)]
    connects: usize,
    /// Cold starts timed on the existing database.
    #[arg(long, default_value_t = 5)]
    starts: usize,
    /// Only the per-session memory figure (step 4).
    #[arg(long)]
    memory_only: bool,
    /// Only this broker tool's load (beside the echo servers), e.g. to profile it: no memory
    /// figure, no cold starts.
    #[arg(long, value_parser = ["list_connections", "provider_request"])]
    only: Option<String>,
    /// Another broker binary (e.g. a build of `main`), measured the same way in the same run as
    /// a baseline: its `list_connections` and `provider_request` beside this build's, in the
    /// same interleaved rounds and at the same fixed rates, and its memory figure.
    #[arg(long)]
    baseline_broker: Option<PathBuf>,
    /// Offered rates (requests per second) of the fixed-rate load, comma-separated; every
    /// server gets the same ones.
    #[arg(long, value_delimiter = ',', default_values_t = [1000.0, 4000.0, 8000.0])]
    rates: Vec<f64>,
    /// Seconds of each fixed-rate run (one per server and rate).
    #[arg(long, default_value_t = 8.0)]
    fixed_seconds: f64,
    /// Only the fixed-rate load (step 3b; with `--only`, for that broker tool): no wrk, no
    /// memory figure, no cold starts.
    #[arg(long)]
    fixed_rate_only: bool,
}

/// Seconds of unrecorded load per case before the rounds (warm-up).
const WARM_UP: u64 = 1;

/// The account the load's `provider_request` uses (the demo provider's default).
const ACCOUNT: &str = "demo-user";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = tempfile::Builder::new().prefix("oauth-broker-bench-").tempdir()?;
    let log = dir.path().join("broker.log");
    let port = procs::free_port()?;
    let echo = procs::spawn_echo(&args.echo).await?;
    let ts = match (&args.ts_node, &args.ts_echo) {
        (Some(node), Some(script)) => Some(procs::spawn_ts_echo(node, script).await?),
        _ => None,
    };
    let (broker, demo, _) = procs::spawn_broker(&args.broker, &dir.path().join("data"), port, &log, None, None).await?;
    let password = demo.password.clone().context("a fresh database prints the demo password")?;
    let ts_base = ts.as_ref().map_or("— (not run)".to_owned(), |ts| ts.base.clone());
    println!(
        "bare rmcp echo server: {}   TypeScript SDK echo server: {ts_base}   broker: {} (log {})",
        echo.base,
        broker.base,
        log.display()
    );
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
    let echo_at = Endpoint { http: http.clone(), mcp: echo.mcp(), token: None };
    let ts_at = ts.as_ref().map(|ts| Endpoint { http: http.clone(), mcp: ts.mcp(), token: None });
    if args.memory_only {
        let mut memories = vec![("bare rmcp echo", memory(&echo, &echo_at, args.sessions, false).await?)];
        echo.stop().await;
        if let (Some(ts), Some(ts_at)) = (ts, &ts_at) {
            memories.push(("TypeScript SDK echo", memory(&ts, ts_at, args.sessions, false).await?));
            ts.stop().await;
        }
        broker.stop().await;
        memories.push(("broker", broker_memory(&args, &args.broker, dir.path(), port, &log).await?));
        if let Some(baseline) = &args.baseline_broker {
            memories.push(("broker (baseline)", broker_memory(&args, baseline, dir.path(), port, &log).await?));
        }
        println!();
        print_memory(args.sessions, &memories);
        return Ok(());
    }

    // 2. The browser flow; the first connection is the load's ready grant (untimed: it
    // includes the sign-in's warm-up). The timed ones come after the load (2b), so the load's
    // user has one connection, as most users do: each one more is listed by every
    // `list_connections` call (20 cost it about a third of its rate).
    let mut flow = flow::Flow::start(&broker.base, &demo.token, &password).await?;
    flow.connect(ACCOUNT).await.with_context(|| format!("connecting {ACCOUNT}"))?;
    flow.check_ready(ACCOUNT).await?;

    // The baseline broker, when one is given: on a database of its own, its grant made through
    // the same browser flow, its tools loaded beside this build's.
    let baseline = match (&args.baseline_broker, args.memory_only) {
        (Some(bin), false) => {
            let port = procs::free_port()?;
            let log = dir.path().join("broker-baseline.log");
            let (server, setup, _) =
                procs::spawn_broker(bin, &dir.path().join("data-baseline-load"), port, &log, None, None).await?;
            let password = setup.password.clone().context("a fresh database prints the demo password")?;
            let mut flow = flow::Flow::start(&server.base, &setup.token, &password).await?;
            flow.connect(ACCOUNT).await.with_context(|| format!("connecting {ACCOUNT} on the baseline broker"))?;
            flow.check_ready(ACCOUNT).await?;
            flow.close().await;
            println!("baseline broker: {} (log {})", server.base, log.display());
            Some((server, setup))
        }
        _ => None,
    };

    // 3. Throughput. The bare rmcp echo comes first (the "vs bare rmcp" base), the TypeScript
    // SDK echo second when it runs.
    let broker_at = Endpoint { http: http.clone(), mcp: broker.mcp(), token: Some(demo.token.clone()) };
    let mut cases =
        vec![Case { name: "bare rmcp echo", tool: "echo", args: json!({"text": "hello"}), at: echo_at.clone() }];
    if let Some(ts_at) = &ts_at {
        cases.push(Case {
            name: "TypeScript SDK echo",
            tool: "echo",
            args: json!({"text": "hello"}),
            at: ts_at.clone(),
        });
    }
    let ts_case = ts_at.as_ref().map(|_| 1);
    cases.push(Case {
        name: "broker list_connections",
        tool: "list_connections",
        args: json!({}),
        at: broker_at.clone(),
    });
    cases.push(Case {
        name: "broker provider_request",
        tool: "provider_request",
        args: json!({"provider": "demo", "method": "GET", "path": "/me", "account": ACCOUNT}),
        at: broker_at.clone(),
    });
    if let Some((server, setup)) = &baseline {
        let at = Endpoint { http: http.clone(), mcp: server.mcp(), token: Some(setup.token.clone()) };
        cases.push(Case {
            name: "baseline broker list_connections",
            tool: "list_connections",
            args: json!({}),
            at: at.clone(),
        });
        cases.push(Case {
            name: "baseline broker provider_request",
            tool: "provider_request",
            args: json!({"provider": "demo", "method": "GET", "path": "/me", "account": ACCOUNT}),
            at,
        });
    }
    if let Some(only) = &args.only {
        cases.retain(|case| !case.name.contains("broker ") || case.tool == only);
    }
    let mut tables = Vec::new();
    let saturated: &[(usize, usize, usize)] = if args.fixed_rate_only { &[] } else { &[(1, 16, 2), (64, 64, 4)] };
    for &(sessions, connections, threads) in saturated {
        let mut opened = Vec::new();
        for case in &cases {
            let ids = open_sessions(&case.at, sessions).await?;
            case.at.call(&ids[0], case.tool, &case.args).await.with_context(|| case.name.to_owned())?;
            opened.push(ids);
        }
        // One unrecorded second of load each first: Node compiles its hot path under load (its
        // first second runs at a fraction of its speed), and a short run would report that.
        for (i, case) in cases.iter().enumerate() {
            wrk(&args, case, &opened[i], connections, threads, WARM_UP).await?;
        }
        let mut results: Vec<Vec<WrkResult>> = vec![Vec::new(); cases.len()];
        for round in 0..args.rounds {
            for (i, case) in cases.iter().enumerate() {
                let result = wrk(&args, case, &opened[i], connections, threads, args.seconds).await?;
                eprintln!(
                    "  round {} · {sessions} session(s) × {connections} connections · {}: {:.0} req/s",
                    round + 1,
                    case.name,
                    result.per_second()
                );
                results[i].push(result);
            }
        }
        tables.push((sessions, connections, results.into_iter().map(Median::of).collect::<Vec<_>>()));
        for (case, ids) in cases.iter().zip(&opened) {
            for id in ids {
                let _ = case.at.close(id).await;
            }
        }
    }

    // 3b. Latency at fixed offered rates, 64 connections over 64 sessions, every server at the
    // same rates (open loop: see fixed_rate.rs).
    let pids: Vec<u32> = cases
        .iter()
        .map(|case| match case.name {
            "bare rmcp echo" => echo.pid(),
            "TypeScript SDK echo" => ts.as_ref().map_or(0, Server::pid),
            name if name.starts_with("baseline ") => baseline.as_ref().map_or(0, |(server, _)| server.pid()),
            _ => broker.pid(),
        })
        .collect();
    let fixed = fixed_rates(&args, &cases, &pids).await?;

    // 2b. The browser flow, timed: callback → notifications/elicitation/complete.
    let mut to_notification = Vec::new();
    let mut answered = Vec::new();
    for i in 1..args.connects {
        let account = format!("bench-{i}");
        let timing = flow.connect(&account).await.with_context(|| format!("connecting {account}"))?;
        to_notification.push(timing.to_notification);
        answered.push(timing.callback_answered);
    }
    flow.close().await;
    if let Some((server, _)) = baseline {
        server.stop().await;
    }

    // 4. Memory per idle session with its GET stream open; 5. cold start on the existing
    // database. Neither with `--only` or `--fixed-rate-only` (a profiling run).
    let profiling = args.only.is_some() || args.fixed_rate_only;
    let mut memories = Vec::new();
    let mut starts = Vec::new();
    if !profiling {
        memories.push(("bare rmcp echo", memory(&echo, &echo_at, args.sessions, false).await?));
    }
    echo.stop().await;
    if let (Some(ts), Some(ts_at)) = (ts, &ts_at) {
        if !profiling {
            memories.push(("TypeScript SDK echo", memory(&ts, ts_at, args.sessions, false).await?));
        }
        ts.stop().await;
    }
    broker.stop().await;
    if !profiling {
        memories.push(("broker", broker_memory(&args, &args.broker, dir.path(), port, &log).await?));
        if let Some(baseline) = &args.baseline_broker {
            memories.push(("broker (baseline)", broker_memory(&args, baseline, dir.path(), port, &log).await?));
        }
        for _ in 0..args.starts {
            let (broker, _, took) =
                procs::spawn_broker(&args.broker, &dir.path().join("data"), port, &log, None, None).await?;
            starts.push(took);
            broker.stop().await;
        }
    }

    // Report.
    println!();
    for (sessions, connections, medians) in &tables {
        println!(
            "## tools/call, {sessions} session(s) × {connections} connections (wrk, {} × {} s, medians)",
            args.rounds, args.seconds
        );
        let ts = ts_case.map(|i| medians[i].per_second);
        let (ts_head, ts_rule) = if ts.is_some() { (" vs TypeScript SDK |", "---|") } else { ("", "") };
        println!("| server | tool | req/s | vs bare rmcp |{ts_head} p50 | p99 | errors |");
        println!("|---|---|---|---|{ts_rule}---|---|---|");
        let base = medians[0].per_second;
        for (case, m) in cases.iter().zip(medians) {
            let vs_ts = ts.map_or(String::new(), |ts| format!(" {:.2} |", m.per_second / ts));
            println!(
                "| {} | `{}` | {:.0} | {:.2} |{vs_ts} {:.2} ms | {:.2} ms | {} |",
                case.name,
                case.tool,
                m.per_second,
                m.per_second / base,
                m.p50_us / 1000.0,
                m.p99_us / 1000.0,
                m.errors
            );
        }
        if let Some(ts) = ts {
            let ratio = |tool: &str| {
                cases.iter().zip(medians).find(|(c, _)| c.tool == tool).map_or(0.0, |(_, m)| m.per_second / ts)
            };
            println!(
                "\nbroker / TypeScript SDK echo: `list_connections` {:.2}× (issue 11 asks ≥ 3×), `provider_request` {:.2}×",
                ratio("list_connections"),
                ratio("provider_request")
            );
        }
        if args.baseline_broker.is_some() {
            let rate = |name: &str| cases.iter().zip(medians).find(|(c, _)| c.name == name).map(|(_, m)| m.per_second);
            let against = |tool: &str| match (rate(&format!("broker {tool}")), rate(&format!("baseline broker {tool}")))
            {
                (Some(this), Some(baseline)) if baseline > 0.0 => format!("{:.3}×", this / baseline),
                _ => "—".to_owned(),
            };
            println!(
                "\nthis build / baseline broker, same run: `list_connections` {}, `provider_request` {}",
                against("list_connections"),
                against("provider_request")
            );
        }
        println!();
    }
    print_fixed_rates(&args, &cases, &fixed);
    if profiling {
        return Ok(());
    }
    print_memory(args.sessions, &memories);
    println!(
        "## OAuth callback → notifications/elicitation/complete at the client ({} connections)",
        to_notification.len()
    );
    println!(
        "callback → notification: p50 {} p99 {}; callback answered (includes the demo provider's token endpoint, in-process): p50 {} p99 {}",
        ms(percentile(&to_notification, 50)),
        ms(percentile(&to_notification, 99)),
        ms(percentile(&answered, 50)),
        ms(percentile(&answered, 99)),
    );
    println!();
    println!(
        "## cold start to ready (/readyz 200) on the existing database: median {} (min {}, max {}) over {}",
        ms(percentile(&starts, 50)),
        ms(starts.iter().min().copied().unwrap_or_default()),
        ms(starts.iter().max().copied().unwrap_or_default()),
        starts.len()
    );
    Ok(())
}

/// Sessions and connections of the fixed-rate load (one connection per session).
const FIXED_SESSIONS: usize = 64;

/// Every case at every rate of `--rates`, rate by rate (cases interleaved), each after one
/// unrecorded second at that rate; `outcomes[rate][case]`.
async fn fixed_rates(args: &Args, cases: &[Case], pids: &[u32]) -> anyhow::Result<Vec<Vec<fixed_rate::Outcome>>> {
    let mut opened = Vec::new();
    for case in cases {
        let ids = open_sessions(&case.at, FIXED_SESSIONS).await?;
        case.at.call(&ids[0], case.tool, &case.args).await.with_context(|| case.name.to_owned())?;
        opened.push(ids);
    }
    let mut outcomes = Vec::new();
    for &rate in &args.rates {
        let mut row = Vec::new();
        for ((case, ids), &pid) in cases.iter().zip(&opened).zip(pids) {
            fixed_rate::run(&case.at, ids, case.tool, &case.args, rate, WARM_UP as f64, pid).await?;
            let outcome = fixed_rate::run(&case.at, ids, case.tool, &case.args, rate, args.fixed_seconds, pid).await?;
            eprintln!(
                "  fixed rate {rate:.0}/s · {}: {:.0} req/s answered, p99 {}{}",
                case.name,
                outcome.achieved,
                latency(outcome.p99_us),
                if outcome.keeps_up() { "" } else { " (could not keep up)" }
            );
            row.push(outcome);
        }
        outcomes.push(row);
    }
    for (case, ids) in cases.iter().zip(&opened) {
        for id in ids {
            let _ = case.at.close(id).await;
        }
    }
    Ok(outcomes)
}

fn print_fixed_rates(args: &Args, cases: &[Case], outcomes: &[Vec<fixed_rate::Outcome>]) {
    if outcomes.is_empty() {
        return;
    }
    println!(
        "## tools/call at fixed offered rates, {FIXED_SESSIONS} connections over {FIXED_SESSIONS} sessions (open loop, {} s each; latency from each request's scheduled send time)",
        args.fixed_seconds
    );
    println!(
        "| offered req/s | server | tool | answered req/s | p50 | p99 | p99.9 | errors | unfinished | server CPU, % of a core (µs/call) | sent late, p99 | kept up |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut generator_cpu = 0.0f64;
    for row in outcomes {
        for (case, o) in cases.iter().zip(row) {
            generator_cpu = generator_cpu.max(o.generator_cpu);
            println!(
                "| {:.0} | {} | `{}` | {:.0} | {} | {} | {} | {} | {} | {:.0}% ({:.0}) | {:.2} ms | {} |",
                o.offered,
                case.name,
                case.tool,
                o.achieved,
                latency(o.p50_us),
                latency(o.p99_us),
                latency(o.p999_us),
                o.errors,
                o.unfinished,
                o.server_cpu,
                o.server_cpu_per_call_us,
                o.pacer_late_p99_us as f64 / 1000.0,
                if o.keeps_up() { "yes" } else { "**NO: could not keep up**" }
            );
        }
    }
    // The pacer's own lateness is in every latency above (they run from the schedule): on a
    // machine busy with other work it is the first thing to look at.
    println!(
        "\nload generator (this process): at most {generator_cpu:.0}% of one core. \"sent late\": how late the generator's pacer handed requests out (its own delay, included in the latencies).\n"
    );
}

/// A latency percentile in ms; `None` (the rank fell among unanswered requests) as such.
fn latency(us: Option<u64>) -> String {
    us.map_or("> end (unanswered)".to_owned(), |us| format!("{:.2} ms", us as f64 / 1000.0))
}

fn print_memory(sessions: usize, memories: &[(&str, Memory)]) {
    println!(
        "## memory, {sessions} idle sessions with their GET stream open (the broker's read once all are parked: \
         no rmcp service, after mcp_session_park = {} s)",
        procs::SESSION_PARK.as_secs()
    );
    println!("| server | RSS before | with sessions | per session | after DELETE | after idle expiry |");
    println!("|---|---|---|---|---|---|");
    for (name, m) in memories {
        println!(
            "| {name} | {} KiB | {} KiB | {:.1} KiB | {} KiB | {} |",
            m.before,
            m.with,
            (m.with as f64 - m.before as f64) / sessions as f64,
            m.after,
            m.expired.map_or("—".to_owned(), |kib| format!("{kib} KiB"))
        );
    }
    println!();
}

struct Case {
    name: &'static str,
    tool: &'static str,
    args: Value,
    at: Endpoint,
}

async fn open_sessions(at: &Endpoint, count: usize) -> anyhow::Result<Vec<String>> {
    let opened: Vec<anyhow::Result<String>> =
        futures::stream::iter(0..count).map(|_| at.open_session()).buffer_unordered(16).collect().await;
    opened.into_iter().collect()
}

#[derive(Debug, Clone, Copy)]
struct WrkResult {
    requests: f64,
    seconds: f64,
    p50_us: f64,
    p99_us: f64,
    errors: u64,
}

impl WrkResult {
    fn per_second(&self) -> f64 {
        self.requests / self.seconds
    }
}

struct Median {
    per_second: f64,
    p50_us: f64,
    p99_us: f64,
    errors: u64,
}

impl Median {
    fn of(results: Vec<WrkResult>) -> Self {
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or_default()
        };
        Median {
            per_second: median(results.iter().map(WrkResult::per_second).collect()),
            p50_us: median(results.iter().map(|r| r.p50_us).collect()),
            p99_us: median(results.iter().map(|r| r.p99_us).collect()),
            errors: results.iter().map(|r| r.errors).sum(),
        }
    }
}

async fn wrk(
    args: &Args,
    case: &Case,
    sessions: &[String],
    connections: usize,
    threads: usize,
    seconds: u64,
) -> anyhow::Result<WrkResult> {
    let output = tokio::process::Command::new("wrk")
        .args(["-t", &threads.to_string(), "-c", &connections.to_string(), "-d", &format!("{seconds}s")])
        .arg("-s")
        .arg(&args.script)
        .arg(&case.at.mcp)
        .env("MCP_SESSIONS", sessions.join(","))
        .env("MCP_TOKEN", case.at.token.as_deref().unwrap_or_default())
        .env("MCP_TOOL", case.tool)
        .env("MCP_ARGS", case.args.to_string())
        .output()
        .await
        .context("running wrk (apt-get install -y wrk)")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let Some(line) = stdout.lines().find_map(|l| l.strip_prefix("RESULT ")) else {
        bail!("wrk gave no result: {stdout} {}", String::from_utf8_lossy(&output.stderr));
    };
    let v: Value = serde_json::from_str(line)?;
    let number = |k: &str| v[k].as_f64().unwrap_or_default();
    Ok(WrkResult {
        requests: number("requests"),
        seconds: number("seconds"),
        p50_us: number("p50_us"),
        p99_us: number("p99_us"),
        errors: v["errors"].as_u64().unwrap_or_default(),
    })
}

struct Memory {
    before: u64,
    with: u64,
    after: u64,
    /// After `count` more sessions were left (streams dropped, no DELETE) and expired.
    expired: Option<u64>,
}

/// RSS before, with `count` sessions each listening on its GET stream, and after they are
/// closed and their streams dropped. With `parked`, "with" is read once the server reports
/// every session parked.
async fn memory(server: &Server, at: &Endpoint, count: usize, parked: bool) -> anyhow::Result<Memory> {
    let before = settled_rss(server).await;
    // One connection per stream: nothing shared, nothing pooled.
    let streams = reqwest::Client::builder().pool_max_idle_per_host(0).build()?;
    let opened: Vec<anyhow::Result<(String, reqwest::Response)>> = futures::stream::iter(0..count)
        .map(|_| {
            let streams = streams.clone();
            async move {
                let id = at.open_session().await?;
                let stream = at.listen(&streams, &id).await?;
                Ok((id, stream))
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let opened = opened.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    if parked {
        wait_until_parked(server, at, count).await?;
    }
    let with = settled_rss(server).await;
    let ids: Vec<String> = opened.iter().map(|(id, _)| id.clone()).collect();
    drop(opened);
    let closed: Vec<anyhow::Result<()>> =
        futures::stream::iter(ids.iter()).map(|id| at.close(id)).buffer_unordered(32).collect().await;
    closed.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    // The broker gives the memory of closed sessions back a second after the last one closed
    // (src/mcp/heap_trim.rs); RSS is flat until then, so settling alone would not see it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = settled_rss(server).await;
    Ok(Memory { before, with, after, expired: None })
}

/// The memory figures of broker `bin`, on a fresh process whose idle sessions are parked after
/// [`procs::SESSION_PARK`] and end after [`procs::SESSION_IDLE`] (not during the load, where a
/// case's sessions wait for the others). The baseline broker is given no `mcp_session_park`
/// (a build from before parking knows no such setting), and nothing is waited for.
async fn broker_memory(
    args: &Args,
    bin: &std::path::Path,
    dir: &std::path::Path,
    port: u16,
    log: &std::path::Path,
) -> anyhow::Result<Memory> {
    let idle = Some(procs::SESSION_IDLE);
    let parks = bin == args.broker.as_path();
    let park = parks.then_some(procs::SESSION_PARK);
    let data = dir.join(if parks { "data" } else { "data-baseline" });
    if !data.exists() {
        // Started once before, as the other broker's database was: the first start creates the
        // demo user (its password hash alone moves the RSS by megabytes).
        procs::spawn_broker(bin, &data, port, log, None, None).await?.0.stop().await;
    }
    let (broker, demo, _) = procs::spawn_broker(bin, &data, port, log, idle, park).await?;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(120)).build()?;
    let at = Endpoint { http, mcp: broker.mcp(), token: Some(demo.token) };
    let mut memory = memory(&broker, &at, args.sessions, parks).await?;
    memory.expired = Some(expired(&broker, &at, args.sessions).await?);
    broker.stop().await;
    Ok(memory)
}

/// RSS after `count` sessions opened their GET stream, dropped it without DELETE and were
/// left to expire: the broker ends them once idle for `mcp_session_idle` (its sweep also runs
/// when a session is created, which the one opened after waiting triggers).
async fn expired(server: &Server, at: &Endpoint, count: usize) -> anyhow::Result<u64> {
    let streams = reqwest::Client::builder().pool_max_idle_per_host(0).build()?;
    let opened: Vec<anyhow::Result<reqwest::Response>> = futures::stream::iter(0..count)
        .map(|_| {
            let streams = streams.clone();
            async move { at.listen(&streams, &at.open_session().await?).await }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let opened = opened.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    drop(opened);
    // A new session closes a few idle ones at once; the periodic sweep (every 30 s) the rest.
    tokio::time::sleep(procs::SESSION_IDLE + Duration::from_secs(2)).await;
    let sweeper = at.open_session().await?;
    at.close(&sweeper).await?;
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while active_sessions(server, at).await? > 0 {
        if std::time::Instant::now() > deadline {
            bail!("idle sessions were not expired within 90 s");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Freed memory goes back to the OS about a second after (heap trim, allocator decay).
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(settled_rss(server).await)
}

/// Waits until the broker reports `count` sessions parked.
async fn wait_until_parked(server: &Server, at: &Endpoint, count: usize) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + procs::SESSION_PARK * 2 + Duration::from_secs(60);
    while gauge(server, at, "oauth_broker_mcp_sessions_parked").await? < count as u64 {
        if std::time::Instant::now() > deadline {
            bail!("the idle sessions were not parked within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// The broker's `oauth_broker_mcp_sessions_active` gauge.
async fn active_sessions(server: &Server, at: &Endpoint) -> anyhow::Result<u64> {
    gauge(server, at, "oauth_broker_mcp_sessions_active").await
}

/// One of the broker's gauges, from /metrics.
async fn gauge(server: &Server, at: &Endpoint, name: &str) -> anyhow::Result<u64> {
    let text = at
        .http
        .get(format!("{}/metrics", server.base))
        .bearer_auth(procs::METRICS_TOKEN)
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?;
    // A gauge is exported once something has moved it: until the first session parks, say,
    // `oauth_broker_mcp_sessions_parked` is absent, which means 0.
    let Some(value) = text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')) else {
        return Ok(0);
    };
    Ok(value.trim().parse::<f64>()?.max(0.0) as u64)
}

/// RSS once it stops moving (memory is returned to the allocator asynchronously).
async fn settled_rss(server: &Server) -> u64 {
    let mut last = server.rss_kib();
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = server.rss_kib();
        if now.abs_diff(last) < 64 {
            return now;
        }
        last = now;
    }
    last
}

fn percentile(values: &[Duration], p: usize) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let last = sorted.len().saturating_sub(1);
    sorted.get(last * p / 100).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}
