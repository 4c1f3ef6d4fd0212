//! What ending sessions costs the event log, whose lock every session's events go through
//! (issue 11): a mass close (the idle sweep after a fleet of clients went away, or shutdown)
//! ends sessions one by one, each under that lock.
//!
//! Fills the log as a busy server's is: `SESSIONS` sessions, each with its standalone stream
//! and `REQUESTS` answered request streams (the log keeps at most 10,000 streams), then ends
//! every session and reports the time in all and the longest single close (how long one close
//! held every other session's events back). `cargo bench --bench session_close`

use std::sync::Arc;
use std::time::{Duration, Instant};

use oauth_broker::clock::SystemClock;
use oauth_broker::mcp::transport::event_log::EventLog;
use rmcp::model::{RequestId, ServerJsonRpcMessage, ServerNotification, ServerResult};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;

const SESSIONS: usize = 5_000;
const REQUESTS: usize = 1;
const ROUNDS: usize = 3;

fn main() {
    let note = ServerSseMessage::from_message(ServerJsonRpcMessage::notification(
        ServerNotification::PromptListChangedNotification(Default::default()),
    ));
    let answer =
        ServerSseMessage::from_message(ServerJsonRpcMessage::response(ServerResult::empty(()), RequestId::Number(1)));
    let ids: Vec<String> = (0..SESSIONS).map(|n| format!("{:08x}-bench-session", n * 7919)).collect();
    for round in 1..=ROUNDS {
        let log = EventLog::new(Arc::new(SystemClock));
        for id in &ids {
            log.append(id, &format!("{id}:common"), &note);
            for request in 0..REQUESTS {
                log.append(id, &format!("{id}/{request}"), &answer);
            }
        }
        let streams = log.stream_count();
        let started = Instant::now();
        let mut longest = Duration::ZERO;
        for id in &ids {
            let one = Instant::now();
            log.end_session(id);
            longest = longest.max(one.elapsed());
        }
        let all = started.elapsed();
        assert_eq!(log.stream_count(), 0);
        println!(
            "round {round}: {SESSIONS} sessions, {streams} streams in the log: all closed in {:.1} ms, \
             {:.2} µs per close, the longest close {:.1} µs",
            all.as_secs_f64() * 1e3,
            all.as_secs_f64() * 1e6 / SESSIONS as f64,
            longest.as_secs_f64() * 1e6
        );
    }
}
