//! SSE event ids and replay for MCP sessions, so each event reaches a client once.
//!
//! rmcp's own session manager numbered each stream's events from 0 on its own, and the priming
//! event of a GET stream is also `0`; resuming replayed from the given id inclusive, and a GET
//! without `Last-Event-ID` replayed the whole cache — so notifications arrived twice. Every
//! event our sessions send ([`super::session_transport`]) is appended here first: one
//! increasing sequence (`1`, `2`, …) across all streams, and replay strictly after the id a
//! client names (MCP 2025-11-25 basic/transports §Resumability and Redelivery).
//!
//! The log has no map or lock of its own. Each session's streams ([`SessionLog`])
//! are kept in its entry of the session table ([`crate::mcp::session::table`]), so the entry's
//! removal drops them in the same step and ends their followers; what spans sessions (the
//! sequence, the count of streams, the queues that bound them: [`LogIndex`]) sits beside the
//! entries, under the table's one lock. Replay is only ever reached through the table, which
//! names the session asking: ids are sequential, so they must not open another session's
//! stream. A resumed stream replays what was missed, then follows the stream live until its
//! request is answered (or, for the session's standalone stream, until the session ends).
//!
//! Memory is bounded: each stream keeps its last [`KEPT_PER_STREAM`] events, an answered
//! request's stream is kept [`ANSWERED_KEPT_SECONDS`] for a late resume, at most
//! [`MAX_STREAMS`] streams are kept across sessions (the stream answered longest ago makes
//! room, else the oldest), and a session's streams go with the session. What the queues and
//! maps no longer use is given back by the table ([`LogIndex::queues_mut`],
//! [`LogIndex::take_thinned`]).

use std::borrow::Borrow;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Arc;

use futures::Stream;
use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use tokio::sync::watch;

use crate::clock::Timestamp;

/// Events each stream keeps for replay; a client further behind misses the oldest.
pub const KEPT_PER_STREAM: usize = 64;
/// How long a request's stream stays resumable after its answer.
pub const ANSWERED_KEPT_SECONDS: i64 = 60;
/// How often answered streams are looked for (on a new stream).
const PRUNE_EVERY_SECONDS: i64 = 10;
/// Streams kept at most, across sessions (answered requests still in their resume window,
/// mostly).
pub const MAX_STREAMS: usize = 10_000;
/// A session's standalone (GET) stream is `{session id}:common` (rmcp's name for it).
const COMMON_SUFFIX: &str = ":common";

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The id is not one we handed out, its events are gone, or another session's.
    #[error("unknown event id")]
    Unknown,
}

/// Where a session's transport logs what it sends: the session table, whose entry for the
/// session keeps its streams.
pub trait EventSink: Send + Sync {
    /// Appends an event to `session`'s stream `stream` and returns its id. A session that is
    /// not (or no longer) live keeps nothing.
    fn append(&self, session: &str, stream: &str, event: &ServerSseMessage) -> u64;
}

/// What a resumed stream reads from, under the lock its session's log is kept behind.
pub trait Replay: Send + Sync + 'static {
    /// What follows event `after` on `session`'s stream `stream`.
    fn next_after(&self, session: &str, stream: &str, after: u64) -> Next;
}

/// The live sessions' logs, found by session id (the session table's entries).
pub trait SessionLogs {
    fn log_of(&mut self, session: &str) -> Option<&mut SessionLog>;
}

impl<K, E> SessionLogs for HashMap<K, E>
where
    K: Borrow<str> + Eq + Hash,
    E: AsMut<SessionLog>,
{
    fn log_of(&mut self, session: &str) -> Option<&mut SessionLog> {
        self.get_mut(session).map(AsMut::as_mut)
    }
}

/// One session's streams, kept in its entry of the session table.
pub struct SessionLog {
    /// The session's id, shared with the queues that name its streams.
    session: Arc<str>,
    streams: HashMap<Arc<str>, StreamLog>,
    /// The last id when its newest standalone stream opened (what its priming event `0` stands
    /// for).
    fresh_common: Option<u64>,
}

impl SessionLog {
    pub fn new(session: Arc<str>) -> Self {
        Self { session, streams: HashMap::new(), fresh_common: None }
    }

    /// What follows event `after` on stream `stream`.
    pub fn next_after(&self, stream: &str, after: u64) -> Next {
        let Some(stream) = self.streams.get(stream) else { return Next::End };
        match stream.events.iter().find(|(id, _)| *id > after) {
            Some((id, event)) => Next::Event(*id, event.clone()),
            None if stream.answered_at.is_some() => Next::End,
            None => Next::Wait,
        }
    }

    /// Its streams, by name: the table gives the map's memory back once mostly empty.
    pub fn streams_mut(&mut self) -> &mut HashMap<Arc<str>, StreamLog> {
        &mut self.streams
    }
}

impl AsMut<SessionLog> for SessionLog {
    fn as_mut(&mut self) -> &mut SessionLog {
        self
    }
}

/// What the log keeps across sessions: the sequence of ids, and what bounds the streams.
#[derive(Default)]
pub struct LogIndex {
    /// The last id handed out; ids start at 1, as `0` is rmcp's fixed priming id of a GET.
    last: u64,
    /// Streams kept, across sessions.
    streams: usize,
    /// When answered streams were last dropped.
    pruned_at: Timestamp,
    /// Request streams in the order they were answered, for pruning and eviction without
    /// scanning every stream under the lock (the scans made each new stream cost
    /// O(streams) once the log was full, which capped tool calls at ~1k/s). Entries whose
    /// stream is gone, or was answered again later, are skipped when reached.
    answered: VecDeque<(Timestamp, StreamKey)>,
    /// Every stream in the order it was created (same lazy skipping), for eviction when no
    /// answered stream is left to drop.
    created: VecDeque<StreamKey>,
    /// Sessions whose streams were dropped by pruning or eviction since the table last gave
    /// memory back (their maps may now be mostly empty).
    thinned: Vec<Arc<str>>,
}

/// A stream named across sessions: its session's id and its own name (both shared).
#[derive(Clone)]
pub struct StreamKey {
    session: Arc<str>,
    stream: Arc<str>,
}

/// One stream's kept events.
pub struct StreamLog {
    key: StreamKey,
    events: VecDeque<(u64, ServerSseMessage)>,
    /// When the request's answer went out (a request stream ends with it).
    answered_at: Option<Timestamp>,
    /// The newest id, for live followers; dropped with the stream, which ends them.
    newest: watch::Sender<u64>,
}

impl StreamLog {
    fn new(key: StreamKey) -> Self {
        Self { key, events: VecDeque::new(), answered_at: None, newest: watch::channel(0).0 }
    }

    fn holds(&self, id: u64) -> bool {
        self.events.binary_search_by_key(&id, |(kept, _)| *kept).is_ok()
    }
}

/// What a follower does next.
pub enum Next {
    Event(u64, ServerSseMessage),
    Wait,
    End,
}

/// Where a resumed stream starts: after event `after` of `session`'s stream `stream`.
pub struct Resumption {
    session: Arc<str>,
    stream: Arc<str>,
    after: u64,
    newest: watch::Receiver<u64>,
}

impl Resumption {
    /// Whether it is the session's standalone stream (which ends when the server stops).
    pub fn is_common(&self) -> bool {
        self.stream.ends_with(COMMON_SUFFIX)
    }
}

impl LogIndex {
    /// Appends an event to `session`'s stream `stream_id` and returns its id; nothing is kept
    /// for a session that is not in `sessions`.
    pub fn append(
        &mut self,
        sessions: &mut impl SessionLogs,
        now: Timestamp,
        session: &str,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> u64 {
        self.last += 1;
        let id = self.last;
        let Some(log) = sessions.log_of(session) else { return id };
        if !log.streams.contains_key(stream_id) {
            let key = StreamKey { session: log.session.clone(), stream: Arc::from(stream_id) };
            // A new stream is when memory grows: answered streams past their window go first.
            if now - self.pruned_at >= PRUNE_EVERY_SECONDS || self.streams >= MAX_STREAMS {
                self.prune(sessions, now);
            }
            if self.streams >= MAX_STREAMS {
                self.evict_oldest(sessions);
            }
            let Some(log) = sessions.log_of(session) else { return id };
            self.insert_stream(log, key.stream.clone());
            self.created.push_back(key);
            self.forget_gone(sessions);
        }
        let Some(stream) = sessions.log_of(session).and_then(|log| log.streams.get_mut(stream_id)) else {
            return id;
        };
        let mut stored = event.clone();
        stored.event_id = Some(id.to_string());
        let answered = !stream_id.ends_with(COMMON_SUFFIX) && is_answer(&stored);
        if answered {
            stream.answered_at = Some(now);
        }
        stream.events.push_back((id, stored));
        if stream.events.len() > KEPT_PER_STREAM {
            stream.events.pop_front();
        }
        stream.newest.send_replace(id);
        if answered {
            self.answered.push_back((now, stream.key.clone()));
        }
        id
    }

    /// A fresh standalone stream opens for `session`: its priming event `0` stands for "now".
    pub fn mark_fresh_common(&mut self, sessions: &mut impl SessionLogs, now: Timestamp, session: &str) {
        let last = self.last;
        if let Some(log) = sessions.log_of(session) {
            log.fresh_common = Some(last);
        }
        self.prune(sessions, now);
    }

    /// Where `session`'s stream resumes after event `last_event_id`. `0` is the priming event
    /// of the session's newest standalone stream. Refused for an id we no longer hold or that
    /// belongs to another session.
    pub fn resume(
        &mut self,
        sessions: &mut impl SessionLogs,
        session: &str,
        last_event_id: &str,
    ) -> Result<Resumption, ReplayError> {
        let id = last_event_id.trim().parse::<u64>().map_err(|_| ReplayError::Unknown)?;
        let log = sessions.log_of(session).ok_or(ReplayError::Unknown)?;
        let (stream, after) = if id == 0 {
            let after = log.fresh_common.unwrap_or(self.last);
            let name = format!("{session}{COMMON_SUFFIX}");
            if !log.streams.contains_key(name.as_str()) {
                self.insert_stream(log, Arc::from(name.as_str()));
            }
            (log.streams.get(name.as_str()).ok_or(ReplayError::Unknown)?, after)
        } else {
            // Only the asking session's own streams are looked in.
            (log.streams.values().find(|stream| stream.holds(id)).ok_or(ReplayError::Unknown)?, id)
        };
        Ok(Resumption {
            session: log.session.clone(),
            stream: stream.key.stream.clone(),
            after,
            newest: stream.newest.subscribe(),
        })
    }

    /// A session left the table with `log`: its streams are no longer counted.
    pub fn session_ended(&mut self, sessions: &mut impl SessionLogs, log: &SessionLog) {
        self.streams = self.streams.saturating_sub(log.streams.len());
        self.forget_gone(sessions);
    }

    /// Streams held across sessions.
    pub fn stream_count(&self) -> usize {
        self.streams
    }

    /// The queues, for the table to give their memory back once mostly empty.
    pub fn queues_mut(&mut self) -> (&mut VecDeque<(Timestamp, StreamKey)>, &mut VecDeque<StreamKey>) {
        (&mut self.answered, &mut self.created)
    }

    /// The sessions that lost streams since the last call (their maps may give memory back).
    pub fn take_thinned(&mut self) -> Vec<Arc<str>> {
        std::mem::take(&mut self.thinned)
    }

    fn insert_stream(&mut self, log: &mut SessionLog, name: Arc<str>) {
        let key = StreamKey { session: log.session.clone(), stream: name.clone() };
        if log.streams.insert(name, StreamLog::new(key)).is_none() {
            self.streams += 1;
        }
    }

    fn remove_stream(&mut self, log: &mut SessionLog, name: &str) {
        if log.streams.remove(name).is_some() {
            self.streams = self.streams.saturating_sub(1);
            if self.thinned.last().is_none_or(|last| *last != log.session) {
                self.thinned.push(log.session.clone());
            }
        }
    }

    /// Drops answered streams past their resume window, oldest answer first.
    fn prune(&mut self, sessions: &mut impl SessionLogs, now: Timestamp) {
        self.pruned_at = now;
        while let Some((at, _)) = self.answered.front() {
            if now - *at <= ANSWERED_KEPT_SECONDS {
                break;
            }
            if let Some((at, key)) = self.answered.pop_front() {
                self.drop_if_answered_at(sessions, &key, at);
            }
        }
        self.forget_gone(sessions);
    }

    /// Removes the stream `key` if its answer is the one recorded `at` (not a stream answered
    /// again).
    fn drop_if_answered_at(&mut self, sessions: &mut impl SessionLogs, key: &StreamKey, at: Timestamp) -> bool {
        let Some(log) = sessions.log_of(&key.session) else { return false };
        if log.streams.get(&key.stream).is_some_and(|s| s.answered_at == Some(at)) {
            self.remove_stream(log, &key.stream);
            return true;
        }
        false
    }

    /// Keeps the creation queue from growing past the streams it stands for.
    fn forget_gone(&mut self, sessions: &mut impl SessionLogs) {
        if self.created.len() > 2 * self.streams + 64 {
            self.created
                .retain(|key| sessions.log_of(&key.session).is_some_and(|log| log.streams.contains_key(&key.stream)));
        }
    }

    /// Makes room for one stream: the stream answered longest ago, else the oldest stream.
    fn evict_oldest(&mut self, sessions: &mut impl SessionLogs) {
        while let Some((at, key)) = self.answered.pop_front() {
            if self.drop_if_answered_at(sessions, &key, at) {
                return;
            }
        }
        while let Some(key) = self.created.pop_front() {
            if let Some(log) = sessions.log_of(&key.session)
                && log.streams.contains_key(&key.stream)
            {
                self.remove_stream(log, &key.stream);
                return;
            }
        }
    }
}

/// A request's answer: a request stream ends with it.
fn is_answer(event: &ServerSseMessage) -> bool {
    matches!(event.message.as_deref(), Some(ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_)))
}

/// The events of a resumed stream from where `from` names, read from `log`: what was missed,
/// then the new ones live, until the stream or its session ends.
pub fn follow<R: Replay>(
    log: Arc<R>,
    from: Resumption,
) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
    let Resumption { session, stream, after, newest } = from;
    futures::stream::unfold(Follower { log, session, stream, after, newest }, Follower::next)
}

/// Follows one stream from an id on.
struct Follower<R> {
    log: Arc<R>,
    session: Arc<str>,
    stream: Arc<str>,
    after: u64,
    newest: watch::Receiver<u64>,
}

impl<R: Replay> Follower<R> {
    async fn next(mut self) -> Option<(ServerSseMessage, Self)> {
        loop {
            // Marked seen before reading, so an event appended meanwhile still wakes us.
            self.newest.borrow_and_update();
            match self.log.next_after(&self.session, &self.stream, self.after) {
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
    use crate::mcp::session::SessionTable;

    fn note() -> ServerSseMessage {
        ServerSseMessage::from_message(ServerJsonRpcMessage::notification(
            ServerNotification::PromptListChangedNotification(Default::default()),
        ))
    }

    fn answer() -> ServerSseMessage {
        ServerSseMessage::from_message(ServerJsonRpcMessage::response(
            rmcp::model::ServerResult::empty(()),
            rmcp::model::RequestId::Number(1),
        ))
    }

    /// A session table (where the log is kept) with sessions `s1`, `s2` and `s3` open.
    fn log_at(clock: &ManualClock) -> Arc<SessionTable> {
        let table = Arc::new(SessionTable::new(Arc::new(clock.clone())));
        for id in ["s1", "s2", "s3"] {
            table.open_for_test(id);
        }
        table
    }

    fn log() -> Arc<SessionTable> {
        log_at(&ManualClock::new(1_000))
    }

    fn end_session(table: &SessionTable, id: &str) {
        table.remove(id, |_| false);
    }

    /// The names of `session`'s streams, as its entry holds them.
    fn streams_of(table: &SessionTable, session: &str) -> Vec<String> {
        table.with_log(|_, sessions| {
            let mut names: Vec<String> = sessions
                .log_of(session)
                .map(|log| log.streams.keys().map(|k| k.to_string()).collect())
                .unwrap_or_default();
            names.sort();
            names
        })
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

        end_session(&log, "s1");
        assert!(follow.next().await.is_none());
        assert_eq!(log.stream_count(), 0, "the session's memory is returned");
    }

    #[test]
    fn an_answered_request_stream_is_dropped_after_its_resume_window() {
        let clock = ManualClock::new(1_000);
        let log = log_at(&clock);
        log.append("s1", "request-a", &answer());
        clock.advance(ANSWERED_KEPT_SECONDS + 1);
        log.append("s1", "request-b", &note());
        assert_eq!(log.stream_count(), 1, "only the unanswered stream is left");
        assert_eq!(streams_of(&log, "s1"), ["request-b"], "and the session's entry forgot it");
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

        end_session(&log, "s1");

        assert_eq!(log.stream_count(), 5, "s2's four and s3's one");
        let (_, replay) = log.resume("s2", &seen.to_string()).unwrap();
        assert_eq!(ids(replay, 1).await, [kept.to_string()], "s2's events are all still there");
        assert!(log.resume("s1", &kept.to_string()).is_err(), "and still not s1's to read");
        end_session(&log, "s2");
        end_session(&log, "s3");
        assert_eq!(log.stream_count(), 0);
        assert!(log.is_empty(), "nothing of them is left");
    }

    #[test]
    fn a_full_log_makes_room_by_dropping_the_stream_answered_longest_ago() {
        let log = log();
        // A listening session first, then a full log of answered requests still in their window.
        let listening = log.append("s1", "s1:common", &note());
        for i in 0..MAX_STREAMS - 1 {
            log.append("s2", &format!("request-{i}"), &answer());
        }
        assert_eq!(log.stream_count(), MAX_STREAMS);

        log.append("s2", "request-new", &answer());

        assert_eq!(log.stream_count(), MAX_STREAMS, "bounded");
        let kept = |name: &str| log.with_log(|_, sessions| sessions.log_of("s2").unwrap().streams.contains_key(name));
        assert!(!kept("request-0"), "the oldest answer made room");
        assert!(kept("request-1"));
        assert!(log.resume("s1", &listening.to_string()).is_ok(), "the open session's stream is kept");
        let queued = log.with_log(|index, _| index.created.len());
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
        let kept = log.with_log(|_, sessions| sessions.log_of("s1").unwrap().streams["s1:common"].events.len());
        assert_eq!(kept, KEPT_PER_STREAM);
    }

    #[test]
    fn a_session_that_is_not_in_the_table_keeps_nothing() {
        let log = log();
        end_session(&log, "s1");

        let id = log.append("s1", "s1:common", &note());

        assert!(id >= 1, "an id all the same");
        assert_eq!(log.stream_count(), 0);
        assert!(log.resume("s1", "0").is_err(), "nor is anything opened for it");
        assert!(log.resume("s1", &id.to_string()).is_err());
    }
}
