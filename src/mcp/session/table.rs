//! The live MCP sessions: one map from session id to everything the broker keeps about the
//! session, behind one lock (the shape of mini-redis's `db.rs`).
//!
//! An [`Entry`] owns, for one session:
//! - its **owner** (the user and client whose token opened it) and its **protocol era** (the
//!   version its initialize result named), checked on every request ([`super::owner`]);
//! - its **scope** (elicitations it started, subscriptions, log level: [`SessionScope`]),
//!   shared with every handler instance that serves it;
//! - its **liveness** ([`Life`]: open streams, an authorization waiting for the user, the last
//!   request), which decides when it expires;
//! - its **transport** ([`Session`]: streams, the rmcp service or none while parked, and the
//!   phase it is in);
//! - its **event log** ([`SessionLog`]: the SSE events its streams sent, kept for a client
//!   that resumes with `Last-Event-ID`). What the log keeps across sessions (the one sequence of
//!   ids, the bound on streams and the queues that enforce it: [`LogIndex`]) sits beside the
//!   entries, under the same lock; the rules are in [`crate::mcp::transport::event_log`].
//!
//! Sessions leave the map in one place ([`SessionTable::remove`]): the entry goes with its
//! event log, whose followers end and whose streams stop counting against the bound, in the same
//! step. Memory is given back in one place too ([`State::give_back`], [`super::shrink`]): the
//! map, the log's queues and the stream maps of sessions the log thinned, once mostly empty. One
//! sweep ([`SessionTable::sweep`]) finds both the sessions to park and the ones to close.
//!
//! Lock order: a session's transport logs its events while it holds its own lock, so this
//! table's lock is always taken after a transport's, never before (nothing here calls into a
//! transport under the table's lock).
//!
//! Time for expiry and for the log's resume window comes from the injected clock, so tests move
//! it instead of waiting; parking looks at the transport's own last message.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::Stream;
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};

use super::scope::SessionScope;
use super::shrink;
use crate::clock::{SharedClock, Timestamp};
use crate::mcp::transport::event_log::{self, EventSink, LogIndex, Next, Replay, ReplayError, SessionLog};
use crate::mcp::transport::session_transport::Session;

/// A session with nothing open ends after this long without a request, unless the operator
/// set `mcp_session_idle` ([`crate::config::Config::mcp_session_idle`]).
pub const IDLE_SECONDS: i64 = crate::config::MCP_SESSION_IDLE.as_secs() as i64;

/// The first revision with SSE priming events (SEP-1699). Versions are dates, so they compare
/// as strings.
const PRIMING_SINCE: &str = "2025-11-25";

pub struct SessionTable {
    clock: SharedClock,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Keyed by the session's id, shared with its event log.
    entries: HashMap<SessionId, Entry>,
    /// What the event log keeps across sessions.
    log: LogIndex,
}

/// Everything kept about one live session.
pub struct Entry {
    /// Who owns it (user and client, [`super::owner::owner_key`]); `None` until the initialize
    /// response that names the session has been seen, and such a session is refused.
    owner: Option<String>,
    /// The version its initialize result named; `None` until it has been seen.
    protocol_version: Option<String>,
    pub scope: Arc<SessionScope>,
    life: Life,
    pub transport: Arc<Session>,
    /// The events its streams sent, for a client that resumes.
    log: SessionLog,
}

impl AsMut<SessionLog> for Entry {
    fn as_mut(&mut self) -> &mut SessionLog {
        &mut self.log
    }
}

/// What keeps a session alive.
///
/// rmcp ends a session after 5 minutes without a message, even while the client listens on an
/// open GET stream — and connect links live 10 minutes, so a user who approved after 5 minutes
/// never got the completion notification. Here a session expires only when nothing is open: no
/// stream (a listening GET or a request still running), no authorization it started still
/// waiting for the user, and no request for `mcp_session_idle`.
#[derive(Debug, Clone, Copy)]
struct Life {
    last_active: Timestamp,
    open_streams: usize,
    /// An authorization this session started waits for the user until then.
    pending_until: Timestamp,
}

impl Life {
    fn expired(&self, now: Timestamp, idle_seconds: i64) -> bool {
        self.open_streams == 0 && self.pending_until <= now && now - self.last_active >= idle_seconds
    }
}

/// What the owner check learns about a session.
pub enum SessionCheck {
    /// A session of this user; `priming` is false for sessions on a revision before 2025-11-25.
    Allowed { priming: bool },
    /// The session belongs to someone else.
    Foreign,
    /// No owner on record (ended, never bound, or from before a restart): refused like an
    /// ended session.
    Unknown,
}

/// What one sweep found.
#[derive(Default)]
pub struct Sweep {
    /// Sessions that expired, to close.
    pub expired: Vec<String>,
    /// The other sessions' transports, to park those with nothing in flight.
    pub to_park: Vec<Arc<Session>>,
}

/// Whether a session on `version` gets SSE priming events.
pub fn primes(version: &str) -> bool {
    version >= PRIMING_SINCE
}

impl SessionTable {
    pub fn new(clock: SharedClock) -> Self {
        Self { clock, state: Mutex::default() }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// A new session, active now.
    pub fn open(&self, id: &str, transport: Arc<Session>, scope: Arc<SessionScope>) {
        let id: SessionId = Arc::from(id);
        let life = Life { last_active: self.now(), open_streams: 0, pending_until: 0 };
        let log = SessionLog::new(id.clone());
        let entry = Entry { owner: None, protocol_version: None, scope, life, transport, log };
        self.state().entries.insert(id, entry);
    }

    /// Whether the request of `owner_key` may use session `id`.
    pub fn check(&self, id: &str, owner_key: &str) -> SessionCheck {
        match self.state().entries.get(id).map(|e| (e.owner.as_deref(), e.protocol_version.as_deref())) {
            Some((Some(owner), version)) if owner == owner_key => {
                SessionCheck::Allowed { priming: version.is_none_or(primes) }
            }
            Some((Some(_), _)) => SessionCheck::Foreign,
            Some((None, _)) | None => SessionCheck::Unknown,
        }
    }

    /// Records who owns the session the initialize response named. Owners go with their
    /// session, however it ends; a session that is gone stays gone.
    pub fn bind(&self, id: &str, owner_key: &str) {
        if let Some(entry) = self.state().entries.get_mut(id) {
            entry.owner = Some(owner_key.to_owned());
        }
    }

    /// Forgets who owns the session: from now on it is refused like an ended one.
    pub fn disown(&self, id: &str) {
        if let Some(entry) = self.state().entries.get_mut(id) {
            entry.owner = None;
        }
    }

    /// Records the version the session's initialize result named.
    pub fn set_protocol_version(&self, id: &str, version: &str) {
        if let Some(entry) = self.state().entries.get_mut(id) {
            entry.protocol_version = Some(version.to_owned());
        }
    }

    pub fn has(&self, id: &str) -> bool {
        self.state().entries.contains_key(id)
    }

    pub fn scope(&self, id: &str) -> Option<Arc<SessionScope>> {
        self.state().entries.get(id).map(|e| e.scope.clone())
    }

    /// The session's transport, without counting a request.
    pub fn transport(&self, id: &str) -> Option<Arc<Session>> {
        self.state().entries.get(id).map(|e| e.transport.clone())
    }

    /// A request on the session: it is active now; its transport.
    pub fn touch(&self, id: &str) -> Option<Arc<Session>> {
        let now = self.now();
        let mut state = self.state();
        let entry = state.entries.get_mut(id)?;
        entry.life.last_active = now;
        Some(entry.transport.clone())
    }

    /// A request that opens a stream on the session: its transport, and the stream's guard,
    /// which keeps the session open until it drops (one lock for both).
    pub fn open_stream(self: &Arc<Self>, id: &str) -> Option<(Arc<Session>, StreamGuard)> {
        let now = self.now();
        let mut state = self.state();
        let entry = state.entries.get_mut(id)?;
        entry.life.last_active = now;
        entry.life.open_streams += 1;
        let transport = entry.transport.clone();
        drop(state);
        Some((transport, StreamGuard { table: self.clone(), id: id.to_owned() }))
    }

    /// The session keeps living at least until `until` (an authorization it started waits).
    pub fn pending_until(&self, id: &str, until: Timestamp) {
        if let Some(entry) = self.state().entries.get_mut(id) {
            entry.life.pending_until = entry.life.pending_until.max(until);
        }
    }

    /// The sessions that expired (nothing open, no request for `idle_seconds`), at most
    /// `limit`, and, if `parking`, the others' transports (those with nothing in flight park).
    pub fn sweep(&self, idle_seconds: i64, limit: usize, parking: bool) -> Sweep {
        let now = self.now();
        let state = self.state();
        let mut sweep = Sweep::default();
        for (id, entry) in &state.entries {
            if sweep.expired.len() < limit && entry.life.expired(now, idle_seconds) {
                sweep.expired.push(id.to_string());
            } else if parking {
                sweep.to_park.push(entry.transport.clone());
            }
        }
        sweep
    }

    /// The one way out of the table: the entry goes with its event log (followers of its
    /// streams end, and they stop counting against the log's bound), and memory is given back.
    /// `keep` may refuse (rmcp's close of a parked session's first service); it is asked
    /// without the table's lock, as it takes the transport's (see the lock order above).
    pub fn remove(&self, id: &str, keep: impl FnOnce(&Session) -> bool) -> Option<Entry> {
        let transport = self.transport(id)?;
        if keep(transport.as_ref()) {
            return None;
        }
        let mut guard = self.state();
        let state = &mut *guard;
        let entry = state.entries.remove(id)?;
        state.log.session_ended(&mut state.entries, &entry.log);
        state.give_back();
        drop(guard);
        // Its relay of notifications stops, even while a handler still holds the scope.
        entry.scope.cancel.cancel();
        Some(entry)
    }

    /// A fresh standalone stream opens for session `id`: its priming event `0` stands for now.
    pub fn mark_fresh_common(&self, id: &str) {
        let now = self.now();
        let mut guard = self.state();
        let state = &mut *guard;
        state.log.mark_fresh_common(&mut state.entries, now, id);
        state.give_back();
    }

    /// The events of session `id`'s stream after `last_event_id`, then its new ones live; and
    /// whether it is the session's standalone stream. Refused for an id the session's log no
    /// longer holds or never held ([`event_log::LogIndex::resume`]).
    pub fn resume(
        self: &Arc<Self>,
        id: &str,
        last_event_id: &str,
    ) -> Result<(bool, impl Stream<Item = ServerSseMessage> + Send + Sync + 'static), ReplayError> {
        let from = {
            let mut guard = self.state();
            let state = &mut *guard;
            state.log.resume(&mut state.entries, id, last_event_id)?
        };
        Ok((from.is_common(), event_log::follow(self.clone(), from)))
    }

    /// Event-log streams held across sessions (for tests of memory).
    pub fn stream_count(&self) -> usize {
        self.state().log.stream_count()
    }

    /// Opens session `id` with a transport and a scope of its own, as tests need it.
    #[cfg(test)]
    pub(crate) fn open_for_test(
        self: &Arc<Self>,
        id: &str,
    ) -> (Arc<Session>, Arc<SessionScope>, crate::mcp::transport::session_transport::SessionTransport) {
        self.open_parking_for_test(id, None)
    }

    /// [`Self::open_for_test`], parking as `parking` says.
    #[cfg(test)]
    pub(crate) fn open_parking_for_test(
        self: &Arc<Self>,
        id: &str,
        parking: Option<crate::mcp::transport::session_transport::Parking>,
    ) -> (Arc<Session>, Arc<SessionScope>, crate::mcp::transport::session_transport::SessionTransport) {
        let sink: std::sync::Weak<dyn EventSink> = Arc::downgrade(self) as _;
        let (transport, handler_side) = Session::open(id.into(), sink, parking);
        let outbox: Arc<dyn super::scope::Outbox> = transport.clone();
        let scope =
            Arc::new(SessionScope::open(id, tokio_util::sync::CancellationToken::new(), Arc::downgrade(&outbox)));
        self.open(id, transport.clone(), scope.clone());
        (transport, scope, handler_side)
    }

    /// The event log's state across sessions and the entries, as tests inspect them.
    #[cfg(test)]
    pub(crate) fn with_log<T>(&self, f: impl FnOnce(&mut LogIndex, &mut HashMap<SessionId, Entry>) -> T) -> T {
        let mut guard = self.state();
        let state = &mut *guard;
        f(&mut state.log, &mut state.entries)
    }

    /// Every live session's id (to close them all when the server stops).
    pub fn ids(&self) -> Vec<SessionId> {
        self.state().entries.keys().cloned().collect()
    }

    /// Sessions held (the admin dashboard counts them; tests of memory).
    pub fn len(&self) -> usize {
        self.state().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl State {
    /// The one place memory is given back: the map of sessions, the event log's
    /// queues, and the stream maps of the sessions whose streams the log dropped, each once at
    /// most a quarter of it is in use ([`super::shrink`]). Each check is a comparison.
    fn give_back(&mut self) {
        shrink::map(&mut self.entries);
        for id in self.log.take_thinned() {
            if let Some(entry) = self.entries.get_mut(&*id) {
                shrink::map(entry.log.streams_mut());
            }
        }
        let (answered, created) = self.log.queues_mut();
        shrink::deque(answered);
        shrink::deque(created);
    }
}

// The session's transport logs here what it sends, into the session's own entry.
impl EventSink for SessionTable {
    fn append(&self, session: &str, stream: &str, event: &ServerSseMessage) -> u64 {
        let now = self.now();
        let mut guard = self.state();
        let state = &mut *guard;
        let id = state.log.append(&mut state.entries, now, session, stream, event);
        state.give_back();
        id
    }
}

// A resumed stream reads the session's entry, under the table's lock.
impl Replay for SessionTable {
    fn next_after(&self, session: &str, stream: &str, after: u64) -> Next {
        self.state().entries.get(session).map_or(Next::End, |entry| entry.log.next_after(stream, after))
    }
}

/// An open stream of a session; dropping it (the client went away, or the stream ended)
/// starts the idle time over.
pub struct StreamGuard {
    table: Arc<SessionTable>,
    id: String,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let now = self.table.now();
        if let Some(entry) = self.table.state().entries.get_mut(self.id.as_str()) {
            entry.life.open_streams = entry.life.open_streams.saturating_sub(1);
            entry.life.last_active = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::ServerNotification;

    use super::*;
    use crate::clock::ManualClock;

    fn table() -> (Arc<SessionTable>, ManualClock) {
        let clock = ManualClock::new(1_000);
        (Arc::new(SessionTable::new(Arc::new(clock.clone()))), clock)
    }

    fn open(table: &Arc<SessionTable>, id: &str) {
        table.open_for_test(id);
    }

    fn idle(table: &SessionTable, idle_seconds: i64) -> Vec<String> {
        table.sweep(idle_seconds, usize::MAX, false).expired
    }

    #[test]
    fn a_session_without_anything_open_is_idle_after_the_timeout() {
        let (table, clock) = table();
        open(&table, "s1");
        clock.advance(IDLE_SECONDS - 1);
        assert!(idle(&table, IDLE_SECONDS).is_empty());
        clock.advance(1);
        assert_eq!(idle(&table, IDLE_SECONDS), ["s1"]);
    }

    #[test]
    fn an_open_stream_keeps_a_session_and_closing_it_starts_the_idle_time_over() {
        let (table, clock) = table();
        open(&table, "s1");
        let (_, stream) = table.open_stream("s1").unwrap();
        clock.advance(IDLE_SECONDS * 3);
        assert!(idle(&table, IDLE_SECONDS).is_empty(), "listening is not idle");
        drop(stream);
        clock.advance(IDLE_SECONDS - 1);
        assert!(idle(&table, IDLE_SECONDS).is_empty());
        clock.advance(1);
        assert_eq!(idle(&table, IDLE_SECONDS), ["s1"]);
    }

    #[test]
    fn a_pending_authorization_keeps_a_session_until_its_link_expires() {
        let (table, clock) = table();
        open(&table, "s1");
        table.pending_until("s1", 1_000 + 600);
        clock.advance(IDLE_SECONDS + 1);
        assert!(idle(&table, IDLE_SECONDS).is_empty());
        clock.advance(600);
        assert_eq!(idle(&table, IDLE_SECONDS), ["s1"]);
        assert!(table.remove("s1", |_| false).is_some());
        assert!(table.is_empty());
    }

    #[test]
    fn a_session_belongs_to_the_owner_bound_to_it_and_nobody_before_that() {
        let (table, _) = table();
        open(&table, "s1");
        assert!(matches!(table.check("s1", "alice"), SessionCheck::Unknown), "no owner yet: refused");
        table.bind("s1", "alice");
        assert!(matches!(table.check("s1", "alice"), SessionCheck::Allowed { priming: true }));
        assert!(matches!(table.check("s1", "bob"), SessionCheck::Foreign));
        table.set_protocol_version("s1", "2025-06-18");
        assert!(matches!(table.check("s1", "alice"), SessionCheck::Allowed { priming: false }));
        table.remove("s1", |_| false);
        assert!(matches!(table.check("s1", "alice"), SessionCheck::Unknown), "gone with its session");
        table.bind("s1", "alice");
        assert!(matches!(table.check("s1", "alice"), SessionCheck::Unknown), "an ended session stays ended");
    }

    #[test]
    fn every_lookup_of_a_session_shares_its_scope_and_its_removal_ends_its_relay() {
        let (table, _) = table();
        let (transport, _, _) = table.open_for_test("s1");
        let (first, second) = (table.scope("s1").unwrap(), table.scope("s1").unwrap());
        first.subscribe("broker://connections".into());
        first.remember_elicitation("e1");

        assert_eq!(second.subscribed(vec!["broker://connections".into(), "other".into()]), ["broker://connections"]);
        assert!(second.take_elicitation("e1") && !first.take_elicitation("e1"), "completed once");
        assert!(second.notify(ServerNotification::PromptListChangedNotification(Default::default())));

        table.remove("s1", |_| false);
        assert!(first.cancel.is_cancelled());
        assert!(table.scope("s1").is_none());
        drop(transport);
        assert!(!first.notify(ServerNotification::PromptListChangedNotification(Default::default())));
    }

    #[test]
    fn a_session_leaves_the_table_with_its_event_log_and_a_thinned_log_gives_its_memory_back() {
        use crate::mcp::transport::event_log::{ANSWERED_KEPT_SECONDS, SessionLogs};
        let (table, clock) = table();
        open(&table, "s1");
        open(&table, "s2");
        let answer = ServerSseMessage::from_message(rmcp::model::ServerJsonRpcMessage::response(
            rmcp::model::ServerResult::empty(()),
            rmcp::model::RequestId::Number(1),
        ));
        let capacity = |id: &str| table.with_log(|_, sessions| sessions.log_of(id).unwrap().streams_mut().capacity());
        for n in 0..1_000 {
            table.append("s1", &format!("s1/{n}"), &answer);
        }
        table.append("s2", "s2:common", &answer);
        let full = capacity("s1");

        // Act: s1's answers pass their resume window, and a new stream of s2 prunes them.
        clock.advance(ANSWERED_KEPT_SECONDS + 1);
        table.append("s2", "s2/0", &answer);

        assert_eq!(table.stream_count(), 2, "s2's two");
        assert!(capacity("s1") < full / 4, "s1's map gave its memory back: {} of {full}", capacity("s1"));
        table.remove("s2", |_| false);
        assert_eq!(table.stream_count(), 0, "s2's streams went with it");
        assert!(table.resume("s2", "0").is_err(), "and nothing of it can be resumed");
    }
}
