//! Open-loop load at a fixed rate (issue 11's "p99 under 5 ms at 64 connections over 64
//! sessions"): requests are scheduled at `rate` per second whatever the server does, and each
//! one's latency runs from its *scheduled* send time to the end of its answer. A server that
//! stalls therefore shows its stall in every request scheduled behind it (no coordinated
//! omission), and a server slower than the offered rate shows a growing backlog instead of a
//! lower request rate at the same latency, which is all a saturated closed loop (wrk) can show:
//! there, mean latency is connections / throughput (Little's law).
//!
//! One pacer thread walks the schedule with `std::thread::sleep` (high-resolution timers, tens
//! of µs late at most, where tokio's timer wheel rounds up to the next millisecond) and hands
//! request `i` to connection `i % connections`; each connection is one HTTP/1.1 keep-alive
//! connection (hyper, TCP_NODELAY) on its own session, sending its requests one after the
//! other: a request whose connection is still busy waits, and that wait is counted.

use std::time::{Duration, Instant};

use anyhow::Context;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::mcp::{Endpoint, PROTOCOL};

/// How long after the last scheduled send the run still waits for answers; a request not
/// answered by then counts as unfinished (an infinite latency in the percentiles).
const GRACE: Duration = Duration::from_secs(2);

/// A server "keeps up" when it answers at least this share of the offered rate with nothing
/// left unfinished.
const KEEPS_UP: f64 = 0.95;

/// Request `i`'s send time, `i / rate` seconds after the start.
pub fn offset(i: u64, rate: f64) -> Duration {
    Duration::from_secs_f64(i as f64 / rate)
}

/// How many requests a run of `seconds` at `rate` schedules (the last one before the end).
pub fn scheduled(rate: f64, seconds: f64) -> u64 {
    (rate * seconds).ceil() as u64
}

/// Nearest-rank percentile `p` (0–100] of `sorted` latencies in µs, where `unfinished` more
/// requests count as longer than any: `None` when the rank falls among those.
pub fn percentile(sorted: &[u64], unfinished: usize, p: f64) -> Option<u64> {
    let total = sorted.len() + unfinished;
    if total == 0 {
        return Some(0);
    }
    // p / 100 × total is inexact in binary (0.999 × 1000 = 999.0000000000001): without the
    // small allowance its ceiling would be one rank too high.
    let rank = ((p / 100.0) * total as f64 - 1e-9).ceil().max(1.0) as usize;
    sorted.get(rank - 1).copied()
}

/// One fixed-rate run's outcome.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub offered: f64,
    /// Answered (successfully or not) per second, from the start to the last answer.
    pub achieved: f64,
    pub p50_us: Option<u64>,
    pub p99_us: Option<u64>,
    pub p999_us: Option<u64>,
    /// Failed answers (HTTP status, JSON-RPC error, `isError`) and broken connections.
    pub errors: u64,
    /// Scheduled but not answered within [`GRACE`] after the last send.
    pub unfinished: u64,
    /// How late the pacer handed out requests, p99 (the generator's own health).
    pub pacer_late_p99_us: u64,
    /// The load generator's CPU (this process, user + system) over the run, % of one core.
    pub generator_cpu: f64,
    /// The server's CPU over the run, % of one core, and per answered request.
    pub server_cpu: f64,
    pub server_cpu_per_call_us: f64,
}

impl Outcome {
    pub fn keeps_up(&self) -> bool {
        self.unfinished == 0 && self.achieved >= KEEPS_UP * self.offered
    }
}

/// One request's fate, as its connection saw it.
struct Sample {
    latency_us: u64,
    ok: bool,
    answered_at: Instant,
}

/// Runs `rate` requests per second of `tool` for `seconds` over one connection per session in
/// `sessions`, against `at`; `server_pid` is read for the server's CPU time.
pub async fn run(
    at: &Endpoint,
    sessions: &[String],
    tool: &str,
    arguments: &Value,
    rate: f64,
    seconds: f64,
    server_pid: u32,
) -> anyhow::Result<Outcome> {
    let url: url::Url = at.mcp.parse()?;
    let host = url.host_str().context("no host")?.to_owned();
    let port = url.port_or_known_default().context("no port")?;
    let count = scheduled(rate, seconds);
    let connections = sessions.len().max(1);

    // Connections first (outside the schedule), so the first requests do not pay a handshake.
    let mut senders = Vec::with_capacity(connections);
    let mut workers = Vec::with_capacity(connections);
    for session in sessions {
        let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
        stream.set_nodelay(true)?;
        let (send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        let (tx, rx) = mpsc::unbounded_channel::<(u64, Instant)>();
        senders.push(tx);
        let request = Template {
            path: url.path().to_owned(),
            host: format!("{host}:{port}"),
            session: session.clone(),
            token: at.token.clone(),
            body_head: format!(
                r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":{},"arguments":{arguments}}},"id":"#,
                Value::from(tool)
            ),
        };
        workers.push((send, request, rx));
    }

    let cpu_before = (own_cpu(), process_cpu(server_pid));
    let start = Instant::now() + Duration::from_millis(20);
    let deadline = start + offset(count, rate) + GRACE;
    let workers: Vec<_> = workers
        .into_iter()
        .map(|(send, request, rx)| tokio::spawn(connection_worker(send, request, rx, deadline)))
        .collect();
    let pacer = std::thread::spawn(move || pace(start, rate, count, senders));
    let mut samples = Vec::with_capacity(count as usize);
    for worker in workers {
        samples.extend(worker.await??);
    }
    let wall = start.elapsed().as_secs_f64();
    let cpu_after = (own_cpu(), process_cpu(server_pid));
    let late = pacer.join().map_err(|_| anyhow::anyhow!("the pacer panicked"))?;

    let answered = samples.len() as u64;
    let errors = samples.iter().filter(|s| !s.ok).count() as u64;
    let last = samples.iter().map(|s| s.answered_at).max().unwrap_or(start);
    let span = last.saturating_duration_since(start).as_secs_f64().max(offset(count, rate).as_secs_f64());
    let mut latencies: Vec<u64> = samples.iter().filter(|s| s.ok).map(|s| s.latency_us).collect();
    latencies.sort_unstable();
    // Errors are not latencies, but they are not fast successes either: they stay out of the
    // percentiles' base and are reported apart.
    let unfinished = count.saturating_sub(answered);
    let unf = unfinished as usize;
    let server_cpu_s = cpu_after.1 - cpu_before.1;
    Ok(Outcome {
        offered: rate,
        achieved: answered as f64 / span.max(f64::EPSILON),
        p50_us: percentile(&latencies, unf, 50.0),
        p99_us: percentile(&latencies, unf, 99.0),
        p999_us: percentile(&latencies, unf, 99.9),
        errors,
        unfinished,
        pacer_late_p99_us: late,
        generator_cpu: 100.0 * (cpu_after.0 - cpu_before.0) / wall,
        server_cpu: 100.0 * server_cpu_s / wall,
        server_cpu_per_call_us: 1e6 * server_cpu_s / (answered.max(1) as f64),
    })
}

/// Hands request `i` to connection `i % n` at its scheduled time; returns how late it was at
/// the 99th percentile, in µs. Ends (dropping the senders) after the last one.
fn pace(start: Instant, rate: f64, count: u64, senders: Vec<mpsc::UnboundedSender<(u64, Instant)>>) -> u64 {
    let mut late = Vec::with_capacity(count as usize);
    for i in 0..count {
        let due = start + offset(i, rate);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        late.push(Instant::now().saturating_duration_since(due).as_micros() as u64);
        // A closed receiver is a worker that gave up on a broken connection: its requests
        // stay unfinished.
        let _ = senders[(i % senders.len() as u64) as usize].send((i, due));
    }
    late.sort_unstable();
    percentile(&late, 0, 99.0).unwrap_or_default()
}

/// What one connection sends: `tools/call` on its session.
struct Template {
    path: String,
    host: String,
    session: String,
    token: Option<String>,
    /// The JSON-RPC body up to its id.
    body_head: String,
}

impl Template {
    fn request(&self, id: u64) -> anyhow::Result<hyper::Request<Full<Bytes>>> {
        let body = format!("{}{id}}}", self.body_head);
        let mut request = hyper::Request::post(&self.path)
            .header("host", &self.host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL)
            .header("mcp-session-id", &self.session);
        if let Some(token) = &self.token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        Ok(request.body(Full::new(Bytes::from(body)))?)
    }
}

/// Sends its connection's requests in order as the pacer hands them over; one sample each.
/// After a broken connection, or at `deadline`, it stops: the rest of its share stays
/// unfinished.
async fn connection_worker(
    mut send: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    template: Template,
    mut due: mpsc::UnboundedReceiver<(u64, Instant)>,
    deadline: Instant,
) -> anyhow::Result<Vec<Sample>> {
    let mut samples = Vec::new();
    while let Some((id, scheduled)) = due.recv().await {
        let answer = tokio::time::timeout_at(deadline.into(), exchange(&mut send, template.request(id)?)).await;
        let ok = match answer {
            Err(_) => break,
            Ok(Ok(ok)) => ok,
            Ok(Err(_)) => {
                samples.push(Sample { latency_us: 0, ok: false, answered_at: Instant::now() });
                break;
            }
        };
        let answered_at = Instant::now();
        let latency_us = answered_at.saturating_duration_since(scheduled).as_micros() as u64;
        samples.push(Sample { latency_us, ok, answered_at });
    }
    Ok(samples)
}

/// One request and its whole answer; `Ok(false)` for an answer that is not a successful
/// tool result (a fast error would flatter the figures).
async fn exchange(
    send: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    request: hyper::Request<Full<Bytes>>,
) -> anyhow::Result<bool> {
    send.ready().await?;
    let response = send.send_request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    let body = std::str::from_utf8(&body).unwrap_or_default();
    Ok(status.is_success() && body.contains("\"result\"") && !body.contains("\"isError\":true"))
}

/// This process's CPU time so far (user + system), seconds.
fn own_cpu() -> f64 {
    // SAFETY: getrusage writes into the struct it is given and nothing else.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Another process's CPU time so far (utime + stime of /proc/PID/stat), seconds.
fn process_cpu(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after ')'.
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz.max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_spaces_requests_evenly_from_the_start() {
        assert_eq!(offset(0, 4000.0), Duration::ZERO);
        assert_eq!(offset(1, 4000.0), Duration::from_micros(250));
        assert_eq!(offset(4000, 4000.0), Duration::from_secs(1));
        assert_eq!(offset(3, 2000.0), Duration::from_micros(1500));
    }

    #[test]
    fn a_run_schedules_rate_times_seconds_requests() {
        assert_eq!(scheduled(2000.0, 10.0), 20_000);
        assert_eq!(scheduled(2500.0, 0.5), 1250);
        // A fraction of a request still gets sent.
        assert_eq!(scheduled(3.0, 0.5), 2);
        // Every scheduled request is due before the run's end.
        let (rate, seconds) = (333.0, 3.0);
        assert!(offset(scheduled(rate, seconds) - 1, rate) < Duration::from_secs_f64(seconds));
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let sorted: Vec<u64> = (1..=1000).collect();
        assert_eq!(percentile(&sorted, 0, 50.0), Some(500));
        assert_eq!(percentile(&sorted, 0, 99.0), Some(990));
        assert_eq!(percentile(&sorted, 0, 99.9), Some(999));
        assert_eq!(percentile(&sorted, 0, 100.0), Some(1000));
        assert_eq!(percentile(&[7], 0, 50.0), Some(7));
        assert_eq!(percentile(&[], 0, 99.0), Some(0));
    }

    #[test]
    fn unfinished_requests_count_as_slower_than_any_answer() {
        let sorted: Vec<u64> = (1..=990).collect();
        // 10 of 1000 never answered: the 99th percentile is still an answer, beyond it is not.
        assert_eq!(percentile(&sorted, 10, 99.0), Some(990));
        assert_eq!(percentile(&sorted, 10, 99.9), None);
        // Half unanswered: the median is not an answer either.
        assert_eq!(percentile(&sorted[..500], 501, 50.0), None);
    }

    #[test]
    fn a_server_keeps_up_only_at_the_offered_rate_with_nothing_left() {
        let outcome = |achieved: f64, unfinished: u64| Outcome {
            offered: 4000.0,
            achieved,
            p50_us: Some(1),
            p99_us: Some(1),
            p999_us: Some(1),
            errors: 0,
            unfinished,
            pacer_late_p99_us: 0,
            generator_cpu: 0.0,
            server_cpu: 0.0,
            server_cpu_per_call_us: 0.0,
        };
        assert!(outcome(3990.0, 0).keeps_up());
        assert!(!outcome(3500.0, 0).keeps_up());
        assert!(!outcome(4000.0, 1).keeps_up());
    }
}
