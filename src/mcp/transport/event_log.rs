//! SSE event ids and replay for MCP sessions, so each event reaches a client once.
//!
//! rmcp's own session manager numbered each stream's events from 0 on its own, and the priming
//! event of a GET stream is also `0`; resuming replayed from the given id inclusive, and a GET
//! without `Last-Event-ID` replayed the whole cache — so notifications arrived twice. Every
//! event our sessions send ([`crate::mcp::transport::session_transport`]) is appended here first: one
//! increasing sequence (`1`, `2`, …) across all streams, and replay strictly after the id a
//! client names (MCP 2025-11-25 basic/transports §Resumability and Redelivery).
//!
//! Each stream is recorded with the session it belongs to, and replay is only ever reached
//! through [`crate::mcp::session::manager`], which names the session asking: ids are
//! sequential, so they must not open another session's stream. A resumed stream replays what
//! was missed, then follows the stream live until its request is answered (or, for the
//! session's standalone stream, until the session ends).
//!
//! Memory is bounded: each stream keeps its last [`KEPT_PER_STREAM`] events, an answered
//! request's stream is kept [`ANSWERED_KEPT_SECONDS`] for a late resume, and a session's
//! streams go with the session.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use futures::Stream;
use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use tokio::sync::watch;

use crate::clock::{SharedClock, Timestamp};

/// Events each stream keeps for replay; a client further behind misses the oldest.
pub const KEPT_PER_STREAM: usize = 64;
/// How long a request's stream stays resumable after its answer.
pub const ANSWERED_KEPT_SECONDS: i64 = 60;
/// How often answered streams are looked for (on a new stream).
const PRUNE_EVERY_SECONDS: i64 = 10;
/// Streams kept at most (answered requests still in their resume window, mostly).
const MAX_STREAMS: usize = 10_000;
/// A session's standalone (GET) stream is `{session id}:common` (rmcp's name for it).
const COMMON_SUFFIX: &str = ":common";

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The id is not one we handed out, its events are gone, or another session's.
    #[error("unknown event id")]
    Unknown,
}

pub struct EventLog {
    clock: SharedClock,
    inner: Mutex<Log>,
}

#[derive(Default)]
struct Log {
    /// The last id handed out; ids start at 1, as `0` is rmcp's fixed priming id of a GET.
    last: u64,
    streams: HashMap<String, StreamLog>,
    /// Which stream each kept event id belongs to.
    stream_of: HashMap<u64, String>,
    /// Per session: the last id when its newest standalone stream opened (what its priming
    /// event `0` stands for).
    fresh_common: HashMap<String, u64>,
    /// When answered streams were last dropped.
    pruned_at: Timestamp,
    /// Request streams in the order they were answered, for pruning and eviction without
    /// scanning every stream under the lock (issue 11: the scans made each new stream cost
    /// O(streams) once the log was full, which capped tool calls at ~1k/s). Entries whose
    /// stream is gone, or was answered again later, are skipped when reached.
    answered: VecDeque<(Timestamp, String)>,
    /// Every stream in the order it was created (same lazy skipping), for eviction when no
    /// answered stream is left to drop.
    created: VecDeque<String>,
    /// Each session's streams, oldest first, so that a session's end removes its own without
    /// a scan of every stream under the lock (closing 10,000 sessions one by one scanned the
    /// log 10,000 times).
    by_session: HashMap<String, VecDeque<String>>,
}

struct StreamLog {
    session: String,
    events: VecDeque<(u64, ServerSseMessage)>,
    /// When the request's answer went out (a request stream ends with it).
    answered_at: Option<Timestamp>,
    /// The newest id, for live followers; dropped with the stream, which ends them.
    newest: watch::Sender<u64>,
}

impl StreamLog {
    fn new(session: String) -> Self {
        Self { session, events: VecDeque::new(), answered_at: None, newest: watch::channel(0).0 }
    }
}

/// What a follower does next.
enum Next {
    Event(u64, ServerSseMessage),
    Wait,
    End,
}

impl EventLog {
    pub fn new(clock: SharedClock) -> Self {
        Self { clock, inner: Mutex::new(Log::default()) }
    }

    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends an event to `session`'s stream `stream_id` and returns its id.
    pub fn append(&self, session: &str, stream_id: &str, event: &ServerSseMessage) -> u64 {
        let now = self.clock.now();
        let mut log = self.log();
        log.last += 1;
        let id = log.last;
        let log = &mut *log;
        if !log.streams.contains_key(stream_id) {
            // A new stream is when memory grows: answered streams past their window go first.
            if now - log.pruned_at >= PRUNE_EVERY_SECONDS || log.streams.len() >= MAX_STREAMS {
                prune(log, now);
            }
            if log.streams.len() >= MAX_STREAMS {
                evict_oldest(log);
            }
            insert_stream(log, session, stream_id);
            log.created.push_back(stream_id.to_owned());
            forget_gone(log);
        }
        let Some(stream) = log.streams.get_mut(stream_id) else { return id };
        let mut stored = event.clone();
        stored.event_id = Some(id.to_string());
        let answered = !stream_id.ends_with(COMMON_SUFFIX) && is_answer(&stored);
        if answered {
            stream.answered_at = Some(now);
        }
        stream.events.push_back((id, stored));
        if stream.events.len() > KEPT_PER_STREAM
            && let Some((old, _)) = stream.events.pop_front()
        {
            log.stream_of.remove(&old);
        }
        stream.newest.send_replace(id);
        log.stream_of.insert(id, stream_id.to_owned());
        if answered {
            log.answered.push_back((now, stream_id.to_owned()));
        }
        id
    }

    /// A fresh standalone stream opens for `session`: its priming event `0` stands for "now".
    pub fn mark_fresh_common(&self, session: &str) {
        let mut log = self.log();
        let last = log.last;
        log.fresh_common.insert(session.to_owned(), last);
        prune(&mut log, self.clock.now());
    }

    /// The events of `session`'s stream after `last_event_id`, then its new ones live.
    /// `0` is the priming event of the session's newest standalone stream. Refused for an id
    /// we no longer hold or that belongs to another session.
    pub fn resume(
        self: &std::sync::Arc<Self>,
        session: &str,
        last_event_id: &str,
    ) -> Result<(bool, impl Stream<Item = ServerSseMessage> + Send + Sync + 'static), ReplayError> {
        let id = last_event_id.trim().parse::<u64>().map_err(|_| ReplayError::Unknown)?;
        let (stream_id, after, newest) = {
            let mut log = self.log();
            let (stream_id, after) = if id == 0 {
                let after = log.fresh_common.get(session).copied().unwrap_or(log.last);
                (format!("{session}{COMMON_SUFFIX}"), after)
            } else {
                let stream_id = log.stream_of.get(&id).cloned().ok_or(ReplayError::Unknown)?;
                (stream_id, id)
            };
            if !log.streams.contains_key(&stream_id) {
                insert_stream(&mut log, session, &stream_id);
            }
            let Some(stream) = log.streams.get(&stream_id) else { return Err(ReplayError::Unknown) };
            if stream.session != session {
                return Err(ReplayError::Unknown);
            }
            (stream_id, after, stream.newest.subscribe())
        };
        let common = stream_id.ends_with(COMMON_SUFFIX);
        let follower = Follower { log: self.clone(), stream_id, after, newest };
        Ok((common, futures::stream::unfold(follower, Follower::next)))
    }

    /// Forgets a session's streams (it ended): followers end, memory is returned.
    pub fn end_session(&self, session: &str) {
        let mut log = self.log();
        let log = &mut *log;
        log.fresh_common.remove(session);
        for stream_id in log.by_session.remove(session).unwrap_or_default() {
            remove_stream(log, &stream_id);
        }
        forget_gone(log);
        give_back(log);
    }

    fn next_after(&self, stream_id: &str, after: u64) -> Next {
        let log = self.log();
        let Some(stream) = log.streams.get(stream_id) else { return Next::End };
        match stream.events.iter().find(|(id, _)| *id > after) {
            Some((id, event)) => Next::Event(*id, event.clone()),
            None if stream.answered_at.is_some() => Next::End,
            None => Next::Wait,
        }
    }

    /// Streams held (for tests of memory).
    pub fn stream_count(&self) -> usize {
        self.log().streams.len()
    }
}

/// A request's answer: a request stream ends with it.
fn is_answer(event: &ServerSseMessage) -> bool {
    matches!(event.message.as_deref(), Some(ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_)))
}

fn insert_stream(log: &mut Log, session: &str, stream_id: &str) {
    log.streams.insert(stream_id.to_owned(), StreamLog::new(session.to_owned()));
    match log.by_session.get_mut(session) {
        Some(streams) => streams.push_back(stream_id.to_owned()),
        None => {
            log.by_session.insert(session.to_owned(), VecDeque::from([stream_id.to_owned()]));
        }
    }
}

fn remove_stream(log: &mut Log, stream_id: &str) {
    if let Some(stream) = log.streams.remove(stream_id) {
        for (id, _) in stream.events {
            log.stream_of.remove(&id);
        }
        if let Some(streams) = log.by_session.get_mut(&stream.session) {
            // Streams mostly go oldest first (pruning, eviction): found at the front.
            if let Some(at) = streams.iter().position(|id| id == stream_id) {
                streams.remove(at);
            }
            if streams.is_empty() {
                log.by_session.remove(&stream.session);
            }
        }
    }
}

/// Drops answered streams past their resume window, oldest answer first.
fn prune(log: &mut Log, now: Timestamp) {
    log.pruned_at = now;
    while let Some((at, _)) = log.answered.front() {
        if now - *at <= ANSWERED_KEPT_SECONDS {
            break;
        }
        if let Some((at, stream_id)) = log.answered.pop_front() {
            drop_if_answered_at(log, &stream_id, at);
        }
    }
    forget_gone(log);
    give_back(log);
}

/// Removes `stream_id` if its answer is the one recorded `at` (not a stream answered again).
fn drop_if_answered_at(log: &mut Log, stream_id: &str, at: Timestamp) -> bool {
    if log.streams.get(stream_id).is_some_and(|s| s.answered_at == Some(at)) {
        remove_stream(log, stream_id);
        return true;
    }
    false
}

/// Keeps the creation queue from growing past the streams it stands for.
fn forget_gone(log: &mut Log) {
    if log.created.len() > 2 * log.streams.len() + 64 {
        let streams = &log.streams;
        log.created.retain(|id| streams.contains_key(id));
        give_back(log);
    }
}

/// The log's maps and queues give their memory back once mostly empty (each check is a
/// comparison; a table is rebuilt only when at most a quarter of it is in use).
fn give_back(log: &mut Log) {
    use crate::mcp::session::shrink;
    shrink::map(&mut log.by_session);
    shrink::map(&mut log.streams);
    shrink::map(&mut log.stream_of);
    shrink::map(&mut log.fresh_common);
    shrink::deque(&mut log.answered);
    shrink::deque(&mut log.created);
}

/// Makes room for one stream: the stream answered longest ago, else the oldest stream.
fn evict_oldest(log: &mut Log) {
    while let Some((at, stream_id)) = log.answered.pop_front() {
        if drop_if_answered_at(log, &stream_id, at) {
            return;
        }
    }
    while let Some(stream_id) = log.created.pop_front() {
        if log.streams.contains_key(&stream_id) {
            remove_stream(log, &stream_id);
            return;
        }
    }
}

/// Follows one stream from an id on.
struct Follower {
    log: std::sync::Arc<EventLog>,
    stream_id: String,
    after: u64,
    newest: watch::Receiver<u64>,
}

impl Follower {
    async fn next(mut self) -> Option<(ServerSseMessage, Self)> {
        loop {
            // Marked seen before reading, so an event appended meanwhile still wakes us.
            self.newest.borrow_and_update();
            match self.log.next_after(&self.stream_id, self.after) {
                Next::Event(id, event) => {
                    self.after = id;
                    return Some((event, self));
                }
                Next::End => return None,
                Next::Wait => self.newest.changed().await.ok()?,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::StreamExt;
    use rmcp::model::ServerNotification;

    use super::*;
    use crate::clock::ManualClock;

    fn note() -> ServerSseMessage {
        ServerSseMessage::from_message(ServerJsonRpcMessage::notification(
            ServerNotification::PromptListChangedNotification(Default::default()),
        ))
    }

    fn log() -> Arc<EventLog> {
        Arc::new(EventLog::new(Arc::new(ManualClock::new(1_000))))
    }

    async fn ids(stream: impl Stream<Item = ServerSseMessage>, n: usize) -> Vec<String> {
        stream.take(n).map(|e| e.event_id.unwrap()).collect().await
    }

    #[tokio::test]
    async fn ids_are_unique_and_increasing_and_resume_is_strictly_after() {
        let log = log();
        let first = log.append("s1", "s1:common", &note());
        let second = log.append("s1", "s1:common", &note());
        let other = log.append("s1", "request-a", &note());
        assert!(first >= 1 && second > first && other > second);

        let (common, replay) = log.resume("s1", &first.to_string()).unwrap();
        assert!(common);
        assert_eq!(ids(replay, 1).await, [second.to_string()], "the event named is not sent again");
    }

    #[tokio::test]
    async fn a_fresh_standalone_stream_replays_nothing_old_and_its_priming_id_resumes_from_then() {
        let log = log();
        log.append("s1", "s1:common", &note());
        log.mark_fresh_common("s1");
        let missed = log.append("s1", "s1:common", &note());

        let (_, replay) = log.resume("s1", "0").unwrap();
        assert_eq!(ids(replay, 1).await, [missed.to_string()]);
    }

    #[tokio::test]
    async fn another_sessions_events_and_unknown_ids_are_refused() {
        let log = log();
        let theirs = log.append("s1", "s1:common", &note());
        let request = log.append("s1", "request-a", &note());

        assert!(log.resume("s2", &theirs.to_string()).is_err());
        assert!(log.resume("s2", &request.to_string()).is_err());
        assert!(log.resume("s1", "999").is_err());
        assert!(log.resume("s1", "not-a-number").is_err());
        assert!(log.resume("s1", &request.to_string()).is_ok());
    }

    #[tokio::test]
    async fn a_resumed_stream_follows_live_and_ends_with_the_session() {
        let log = log();
        let first = log.append("s1", "s1:common", &note());
        let (_, follow) = log.resume("s1", &first.to_string()).unwrap();
        let mut follow = Box::pin(follow);
        let live = log.append("s1", "s1:common", &note());
        assert_eq!(follow.next().await.unwrap().event_id, Some(live.to_string()));

        log.end_session("s1");
        assert!(follow.next().await.is_none());
        assert_eq!(log.stream_count(), 0, "the session's memory is returned");
    }

    #[test]
    fn an_answered_request_stream_is_dropped_after_its_resume_window() {
        let clock = ManualClock::new(1_000);
        let log = EventLog::new(Arc::new(clock.clone()));
        let answer = ServerSseMessage::from_message(ServerJsonRpcMessage::response(
            rmcp::model::ServerResult::empty(()),
            rmcp::model::RequestId::Number(1),
        ));
        log.append("s1", "request-a", &answer);
        clock.advance(ANSWERED_KEPT_SECONDS + 1);
        log.append("s1", "request-b", &note());
        assert_eq!(log.stream_count(), 1, "only the unanswered stream is left");
        assert_eq!(log.log().by_session["s1"], ["request-b"], "and the session's index forgot it");
    }

    #[tokio::test]
    async fn a_sessions_end_removes_its_own_streams_and_no_others() {
        let log = log();
        for n in 0..3 {
            log.append("s1", &format!("s1/{n}"), &note());
            log.append("s2", &format!("s2/{n}"), &note());
        }
        let seen = log.append("s2", "s2:common", &note());
        let kept = log.append("s2", "s2:common", &note());
        log.append("s1", "s1:common", &note());
        // A resume after the priming id opens the standalone stream's entry before any event.
        let (_, _follow) = log.resume("s3", "0").unwrap();
        assert_eq!(log.stream_count(), 9);

        log.end_session("s1");

        assert_eq!(log.stream_count(), 5, "s2's four and s3's one");
        let (_, replay) = log.resume("s2", &seen.to_string()).unwrap();
        assert_eq!(ids(replay, 1).await, [kept.to_string()], "s2's events are all still there");
        assert!(log.resume("s1", &kept.to_string()).is_err(), "and still not s1's to read");
        log.end_session("s2");
        log.end_session("s3");
        assert_eq!(log.stream_count(), 0);
        let inner = log.log();
        assert!(inner.by_session.is_empty() && inner.stream_of.is_empty(), "nothing of them is left");
    }

    #[test]
    fn a_full_log_makes_room_by_dropping_the_stream_answered_longest_ago() {
        let log = log();
        let answer = ServerSseMessage::from_message(ServerJsonRpcMessage::response(
            rmcp::model::ServerResult::empty(()),
            rmcp::model::RequestId::Number(1),
        ));
        // A listening session first, then a full log of answered requests still in their window.
        let listening = log.append("s1", "s1:common", &note());
        for i in 0..MAX_STREAMS - 1 {
            log.append("s2", &format!("request-{i}"), &answer);
        }
        assert_eq!(log.stream_count(), MAX_STREAMS);

        log.append("s2", "request-new", &answer);

        assert_eq!(log.stream_count(), MAX_STREAMS, "bounded");
        assert!(!log.log().streams.contains_key("request-0"), "the oldest answer made room");
        assert!(log.log().streams.contains_key("request-1"));
        assert!(log.resume("s1", &listening.to_string()).is_ok(), "the open session's stream is kept");
        let queued = log.log().created.len();
        assert!(queued <= 2 * MAX_STREAMS + 64, "the bookkeeping stays bounded too: {queued}");
    }

    #[test]
    fn streams_keep_a_bounded_number_of_events() {
        let log = log();
        let first = log.append("s1", "s1:common", &note());
        for _ in 0..KEPT_PER_STREAM + 10 {
            log.append("s1", "s1:common", &note());
        }
        assert!(log.resume("s1", &first.to_string()).is_err(), "the oldest are gone");
        assert_eq!(log.log().stream_of.len(), KEPT_PER_STREAM);
    }
}
