//! What ending sessions costs the session table, whose lock every session's events go through
//! (issue 11; the event log is kept in the table's entries since issue 24): a mass close (the
//! idle sweep after a fleet of clients went away, or shutdown) ends sessions one by one, each
//! under that lock, and each takes its event log with it.
//!
//! Fills the table as a busy server's is: `SESSIONS` sessions, each with its standalone stream
//! and `REQUESTS` answered request streams (the log keeps at most 10,000 streams), then removes
//! every session and reports the time in all and the longest single close (how long one close
//! held every other session's events back). `cargo bench --bench session_close`

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use oauth_broker::clock::SystemClock;
use oauth_broker::mcp::session::SessionTable;
use oauth_broker::mcp::session::scope::{Outbox, SessionScope};
use oauth_broker::mcp::transport::event_log::EventSink;
use oauth_broker::mcp::transport::session_transport::Session;
use rmcp::model::{RequestId, ServerJsonRpcMessage, ServerNotification, ServerResult};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use tokio_util::sync::CancellationToken;

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
        let log = Arc::new(SessionTable::new(Arc::new(SystemClock)));
        for id in &ids {
            let sink: Weak<dyn EventSink> = Arc::downgrade(&log) as _;
            let (session, _) = Session::open(id.as_str().into(), sink, None);
            let outbox: Arc<dyn Outbox> = session.clone();
            let scope = SessionScope::open(id, CancellationToken::new(), Arc::downgrade(&outbox));
            log.open(id, session, Arc::new(scope));
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
            log.remove(id, |_| false);
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
