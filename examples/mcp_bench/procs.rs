//! The servers under test, as child processes on loopback, and their memory.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

pub struct Server {
    pub child: Child,
    /// `http://127.0.0.1:PORT`
    pub base: String,
}

impl Server {
    pub fn mcp(&self) -> String {
        format!("{}/mcp", self.base)
    }

    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or_default()
    }

    /// Resident memory in KiB (`VmRSS` of /proc/PID/status).
    pub fn rss_kib(&self) -> u64 {
        rss_kib(self.pid())
    }

    /// SIGTERM, then wait for the process to exit.
    pub async fn stop(mut self) {
        let _ = std::process::Command::new("kill").arg("-TERM").arg(self.pid().to_string()).status();
        if tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}

pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Keeps reading a child's stdout so it never blocks on a full pipe.
fn drain(mut lines: Lines<BufReader<ChildStdout>>) {
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
}

/// The bare rmcp echo server (`examples/echo_server.rs`).
pub async fn spawn_echo(bin: &Path) -> anyhow::Result<Server> {
    spawn_listening(Command::new(bin), &bin.display().to_string()).await
}

/// The TypeScript SDK echo server (`bench/ts-echo/server.mjs`) under `node`.
pub async fn spawn_ts_echo(node: &Path, script: &Path) -> anyhow::Result<Server> {
    let mut command = Command::new(node);
    command.arg(script);
    spawn_listening(command, &format!("{} {}", node.display(), script.display())).await
}

/// An echo server on a free loopback port: it prints `listening on http://ADDR` first.
async fn spawn_listening(mut command: Command, what: &str) -> anyhow::Result<Server> {
    let mut child = command
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {what}"))?;
    let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
    let first = lines.next_line().await?.unwrap_or_default();
    let base =
        first.strip_prefix("listening on ").with_context(|| format!("{what} did not say where it listens"))?.to_owned();
    drain(lines);
    Ok(Server { child, base })
}

/// What `serve --demo` printed.
pub struct DemoSetup {
    /// Only on the first start.
    pub password: Option<String>,
    pub token: String,
}

/// How long a session with nothing open lives in the broker of the memory figure (the
/// shortest `mcp_session_idle`), so it can show sessions expiring too.
pub const SESSION_IDLE: Duration = Duration::from_secs(10);
/// How long a session of that broker waits with nothing in flight before it is parked (the
/// shortest `mcp_session_park`), so the figure is taken with the sessions parked, as idle
/// sessions are after 10 s by default.
pub const SESSION_PARK: Duration = Duration::from_secs(1);
/// The bearer token of that broker's /metrics (loopback, a throwaway database).
pub const METRICS_TOKEN: &str = "bench-metrics-token-on-loopback";

/// `oauth-broker serve --demo` on SQLite in `data_dir`, on `port`; returns once `/readyz`
/// answers 200, with the time from spawning to that answer. `idle`: its `mcp_session_idle`;
/// `park`: its `mcp_session_park` (a broker from before parking knows no such setting).
pub async fn spawn_broker(
    bin: &Path,
    data_dir: &Path,
    port: u16,
    log: &Path,
    idle: Option<Duration>,
    park: Option<Duration>,
) -> anyhow::Result<(Server, DemoSetup, Duration)> {
    let started = Instant::now();
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
    let config = data_dir.with_extension("toml");
    // With `idle`, /metrics is on (bearer METRICS_TOKEN) so the figure can wait for the sweep.
    let mut settings =
        idle.map(|idle| format!("mcp_session_idle = \"{}s\"\nmetrics_token = \"{METRICS_TOKEN}\"\n", idle.as_secs()));
    if let (Some(settings), Some(park)) = (&mut settings, park) {
        settings.push_str(&format!("mcp_session_park = \"{}s\"\n", park.as_secs()));
    }
    std::fs::write(&config, settings.unwrap_or_default())?;
    let mut child = Command::new(bin)
        .arg("--config")
        .arg(&config)
        .arg("serve")
        .arg("--demo")
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--data-dir")
        .arg(data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let ready = format!("{base}/readyz");
    let deadline = started + Duration::from_secs(30);
    loop {
        if http.get(&ready).send().await.is_ok_and(|r| r.status() == 200) {
            break;
        }
        if Instant::now() > deadline {
            bail!("the broker was not ready within 30 s (see its log)");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let cold_start = started.elapsed();
    let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
    let (mut password, mut token, mut token_next) = (None, None, false);
    while token.is_none() {
        let Some(line) = lines.next_line().await? else { bail!("the broker printed no demo token") };
        let line = line.trim();
        if token_next {
            token = Some(line.to_owned());
        } else if let Some(rest) = line.strip_prefix("password: ") {
            password = rest.split_whitespace().next().map(str::to_owned);
        }
        token_next = line.starts_with("Bearer token for MCP clients");
    }
    drain(lines);
    let token = token.unwrap_or_default();
    Ok((Server { child, base }, DemoSetup { password, token }, cold_start))
}

/// A port free now (bound and released), for a server that needs its URL before it starts.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
