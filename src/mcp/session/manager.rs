//! The broker's MCP sessions, served to rmcp's HTTP service through its `SessionManager`
//! trait (rmcp's own `LocalSessionManager` is not used):
//!
//! - **One table** ([`SessionTable`]): every live session is one entry, found by its id, that
//!   holds its owner, era, scope, liveness, transport and event log; it leaves the table in one
//!   place ([`BrokerSessions::close_session`]), whatever ends it, and its log goes with it.
//! - **No task or channels of its own per session** ([`Session`]): what a session's handler
//!   sends is routed onto its SSE stream as it is sent ([`crate::mcp::transport::session_transport`]),
//!   which cut an idle session's memory by most of rmcp's worker and channels.
//! - **Sessions live while something is open**: a session with no open stream, no waiting
//!   authorization and no request for `mcp_session_idle` (default
//!   [`crate::config::MCP_SESSION_IDLE`]) expires.
//! - **One sweep** ([`BrokerSessions::sweep`]) closes expired sessions and parks idle ones:
//!   every half `mcp_session_park` (at most every [`SWEEP_EVERY`]), and a few expired ones at
//!   each new session.
//! - **Idle sessions hold no rmcp service** ([`Session::park`]): a session with nothing in
//!   flight for `mcp_session_park` (default [`crate::config::MCP_SESSION_PARK`]) is parked, and
//!   comes back with a new service at its next message.
//! - **Each event is delivered once** ([`crate::mcp::transport::event_log`], kept in the
//!   table): unique increasing ids; a resume replays strictly after `Last-Event-ID`, only the
//!   asking session's own events; a GET without it replays nothing old.
//! - **Stopping tells listeners to reconnect**: when the server starts to stop (`draining`),
//!   every standalone stream gets an SSE `retry:` hint and ends, so clients come back (to
//!   another instance); request streams run on until their answer.
//! - **Closed sessions give their memory back** ([`HeapTrim`]): glibc keeps freed memory, so
//!   the heap is trimmed once enough sessions have closed.
//!
//! `event_store()` stays `None`: with a store rmcp would also offer stateless resumption by
//! event id alone, which cannot check whose events they are.

use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};
use tokio_util::sync::CancellationToken;

use super::heap_trim::HeapTrim;
use super::scope::{Outbox, SessionScope};
use super::table::{SessionTable, StreamGuard};
use crate::mcp::transport::event_log::{EventSink, ReplayError};
use crate::mcp::transport::session_transport::{self, Parking, Session, SessionTransport};

/// How often the sweep runs at the longest (without parking, or with a long `mcp_session_park`).
pub const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// How many expired sessions a new session closes before it is created.
const SWEEP_PER_NEW_SESSION: usize = 16;
/// The `retry:` hint a standalone stream ends with when the server stops: come back soon.
pub const RECONNECT_AFTER: Duration = Duration::from_secs(1);

type SseStream = Pin<Box<dyn Stream<Item = ServerSseMessage> + Send + Sync + 'static>>;

#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    #[error("session not found")]
    NotFound,
    #[error(transparent)]
    Session(#[from] session_transport::SessionError),
    #[error("cannot resume: {0}")]
    Replay(#[from] ReplayError),
}

pub struct BrokerSessions {
    table: Arc<SessionTable>,
    draining: CancellationToken,
    /// Seconds without a request after which a session with nothing open ends.
    idle_seconds: i64,
    heap: Arc<HeapTrim>,
    /// Without it sessions are never parked.
    parking: Option<Parking>,
    park_after: Duration,
}

impl BrokerSessions {
    pub fn new(table: Arc<SessionTable>, draining: CancellationToken) -> Self {
        Self {
            table,
            draining,
            idle_seconds: i64::try_from(crate::config::MCP_SESSION_IDLE.as_secs()).unwrap_or(i64::MAX),
            heap: Arc::default(),
            parking: None,
            park_after: crate::config::MCP_SESSION_PARK,
        }
    }

    /// Sessions with nothing in flight for `after` are parked; `parking` brings them back.
    pub fn with_parking(mut self, after: Duration, parking: Parking) -> Self {
        self.park_after = after.max(crate::config::MCP_SESSION_PARK_AT_LEAST);
        self.parking = Some(parking);
        self
    }

    /// Sessions with nothing open end after `idle` without a request (`mcp_session_idle`).
    pub fn with_idle(mut self, idle: Duration) -> Self {
        self.idle_seconds = i64::try_from(idle.as_secs()).unwrap_or(i64::MAX);
        self
    }

    /// Closes every session (the server stops: parked ones have no service for rmcp to end).
    pub async fn close_all(&self) {
        for id in self.table.ids() {
            let _ = self.close_session(&id).await;
        }
    }

    /// The one sweep: closes expired sessions (at most `limit`) and, with `park`, parks those
    /// with nothing in flight for `mcp_session_park`. Returns how many it closed.
    async fn sweep(&self, limit: usize, park: bool) -> usize {
        let found = self.table.sweep(self.idle_seconds, limit, park && self.parking.is_some());
        for id in &found.expired {
            tracing::debug!(session = %id, "closing an idle MCP session");
            if let Err(error) = self.close_session(&SessionId::from(id.as_str())).await {
                tracing::warn!(%error, "closing an idle MCP session failed");
            }
        }
        for session in &found.to_park {
            session.park(self.park_after);
        }
        found.expired.len()
    }

    /// Sweeps every half `mcp_session_park` (every [`SWEEP_EVERY`] at the longest: one timer
    /// for all sessions, none of their own), until `stop`; then closes every session.
    pub fn start_sweeping(self: &Arc<Self>, stop: CancellationToken) {
        // Held, not weak: at `stop` the HTTP service (the other holder) may be gone already,
        // and the sessions must still be closed (parked ones have no rmcp service to end them).
        let sessions = self.clone();
        let every = match self.parking {
            Some(_) => (self.park_after / 2).min(SWEEP_EVERY),
            None => SWEEP_EVERY,
        };
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = ticks.tick() => { sessions.sweep(usize::MAX, true).await; }
                }
            }
            sessions.close_all().await;
        });
    }

    fn session(&self, id: &SessionId) -> Result<Arc<Session>, SessionsError> {
        self.table.transport(id).ok_or(SessionsError::NotFound)
    }

    /// A stream of a session that counts as open while the client holds it.
    fn tracked(guard: StreamGuard, stream: impl Stream<Item = ServerSseMessage> + Send + Sync + 'static) -> SseStream {
        Box::pin(stream.map(move |event| {
            let _open = &guard;
            event
        }))
    }

    /// A standalone stream that ends with a `retry:` hint when the server starts to stop.
    fn until_draining(&self, stream: SseStream) -> SseStream {
        let draining = self.draining.clone();
        let hint = futures::stream::once(async { ServerSseMessage::retry(RECONNECT_AFTER) });
        Box::pin(stream.take_until(async move { draining.cancelled().await }).chain(hint))
    }
}

impl SessionManager for BrokerSessions {
    type Error = SessionsError;
    type Transport = SessionTransport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        // New sessions are when memory grows, so expired ones go first: a few per new session,
        // so that the client opening it never waits for thousands of closes (the periodic sweep
        // closes the rest), while sessions still cannot pile up faster than they are opened.
        self.sweep(SWEEP_PER_NEW_SESSION, false).await;
        // A random v4 UUID, as rmcp's own (unguessable; never a credential all the same).
        let id = rmcp::transport::common::server_side_http::session_id();
        // Its events are logged into its own entry of the table.
        let log: Weak<dyn EventSink> = Arc::downgrade(&self.table) as _;
        let (session, transport) = Session::open(id.clone(), log, self.parking.clone());
        let outbox: Arc<dyn Outbox> = session.clone();
        // Its relay ends when the session closes (at shutdown too: every session is closed then).
        let scope = SessionScope::open(&id, CancellationToken::new(), Arc::downgrade(&outbox));
        self.table.open(&id, session, Arc::new(scope));
        crate::telemetry::session_opened();
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let session = self.table.touch(id).ok_or(SessionsError::NotFound)?;
        Ok(session.initialize(message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.table.has(id))
    }

    // Every way a session ends comes here: DELETE, the sweep, shutdown, and rmcp once the
    // session's first handler stops (shutdown, or after one of these closed its input) — but
    // not when it stopped because the session parked ([`Session::closed_by_rmcp_worker`]).
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        // Its event log leaves the table with it: nothing it still sends is kept.
        let Some(entry) = self.table.remove(id, Session::closed_by_rmcp_worker) else {
            return Ok(());
        };
        entry.transport.close();
        entry.scope.cancel.cancel();
        // Counted once per session, however many times closing is asked for.
        crate::telemetry::session_closed();
        self.heap.session_closed();
        Ok(())
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let (session, guard) = self.table.open_stream(id).ok_or(SessionsError::NotFound)?;
        let events = session.request(message).await?;
        let events = session_transport::request_events(events, session_transport::PRIMING_WAITS).await;
        Ok(Self::tracked(guard, events))
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        let session = self.table.touch(id).ok_or(SessionsError::NotFound)?;
        Ok(session.accept(message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let (session, guard) = self.table.open_stream(id).ok_or(SessionsError::NotFound)?;
        self.table.mark_fresh_common(id);
        let stream = Self::tracked(guard, session_transport::events(session.standalone()?));
        Ok(self.until_draining(stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.session(id)?;
        let (common, replay) = self.table.resume(id, &last_event_id)?;
        let (_, guard) = self.table.open_stream(id).ok_or(SessionsError::NotFound)?;
        let stream = Self::tracked(guard, replay);
        Ok(if common { self.until_draining(stream) } else { stream })
    }
}
