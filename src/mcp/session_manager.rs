//! The broker's MCP sessions, served to rmcp's HTTP service through its `SessionManager`
//! trait (rmcp's own `LocalSessionManager` is not used; issue 11):
//!
//! - **No task or channels of its own per session** ([`Session`]): what a session's handler
//!   sends is routed onto its SSE stream as it is sent ([`crate::mcp::session_transport`]),
//!   which cut an idle session's memory by most of rmcp's worker and channels.
//! - **Sessions live while something is open** ([`SessionLife`]): a sweep closes sessions with
//!   no open stream, no waiting authorization and no request for `mcp_session_idle` (default
//!   [`session_life::IDLE_SECONDS`]). It runs when a session is created and every
//!   [`SWEEP_EVERY`].
//! - **Each event is delivered once** ([`EventLog`]): unique increasing ids; a resume replays
//!   strictly after `Last-Event-ID`, only the asking session's own events; a GET without it
//!   replays nothing old.
//! - **Stopping tells listeners to reconnect**: when the server starts to stop (`draining`),
//!   every standalone stream gets an SSE `retry:` hint and ends, so clients come back (to
//!   another instance); request streams run on until their answer.
//! - **Idle sessions hold no rmcp service** ([`Session::park`]): a session with nothing in
//!   flight for `mcp_session_park` (default [`PARK_AFTER`]) is parked by a sweep every half of
//!   that, and comes back with a new service at its next message (issue 11).
//! - **Closed sessions give their memory back** ([`HeapTrim`]): glibc keeps freed memory, so
//!   the heap is trimmed once enough sessions have closed (issue 11).
//!
//! `event_store()` stays `None`: with a store rmcp would also offer stateless resumption by
//! event id alone, which cannot check whose events they are.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};
use tokio_util::sync::CancellationToken;

use super::event_log::EventLog;
use super::heap_trim::HeapTrim;
use super::session_life::{self, SessionLife};
use super::session_scope::{Outbox, SessionScopes};
use super::session_transport::{self, Parking, Session, SessionTransport};
use super::sessions::SessionRegistry;

/// How often idle sessions are looked for besides at each new session.
pub const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// How many idle sessions a new session closes before it is created.
const SWEEP_PER_NEW_SESSION: usize = 16;
/// A session with nothing in flight for this long is parked, unless the operator set
/// `mcp_session_park` ([`crate::config::Config::mcp_session_park`]).
pub const PARK_AFTER: Duration = crate::config::MCP_SESSION_PARK;
/// The shortest `mcp_session_park`.
pub const PARK_AT_LEAST: Duration = crate::config::MCP_SESSION_PARK_AT_LEAST;
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
    Replay(#[from] super::event_log::ReplayError),
}

pub struct BrokerSessions {
    sessions: Mutex<HashMap<SessionId, Arc<Session>>>,
    log: Arc<EventLog>,
    life: Arc<SessionLife>,
    owners: Arc<SessionRegistry>,
    draining: CancellationToken,
    /// Seconds without a request after which a session with nothing open ends.
    idle_seconds: i64,
    heap: Arc<HeapTrim>,
    /// Per-session state, which outlives each of a session's services.
    scopes: Arc<SessionScopes>,
    /// Without it sessions are never parked.
    parking: Option<Parking>,
    park_after: Duration,
}

impl BrokerSessions {
    pub fn new(
        log: Arc<EventLog>,
        life: Arc<SessionLife>,
        owners: Arc<SessionRegistry>,
        scopes: Arc<SessionScopes>,
        draining: CancellationToken,
    ) -> Self {
        Self {
            sessions: Mutex::default(),
            log,
            life,
            owners,
            draining,
            idle_seconds: session_life::IDLE_SECONDS,
            heap: Arc::default(),
            scopes,
            parking: None,
            park_after: PARK_AFTER,
        }
    }

    /// Sessions with nothing in flight for `after` are parked; `parking` brings them back.
    pub fn with_parking(mut self, after: Duration, parking: Parking) -> Self {
        self.park_after = after.max(PARK_AT_LEAST);
        self.parking = Some(parking);
        self
    }

    /// Parks every session with nothing in flight for `mcp_session_park`; returns how many.
    pub fn park_idle(&self) -> usize {
        let sessions: Vec<Arc<Session>> =
            self.sessions.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        sessions.iter().filter(|session| session.park(self.park_after)).count()
    }

    /// Closes every session (the server stops: parked ones have no service for rmcp to end).
    pub async fn close_all(&self) {
        let ids: Vec<SessionId> = self.sessions.lock().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect();
        for id in ids {
            let _ = self.close_session(&id).await;
        }
    }

    /// Sessions with nothing open end after `idle` without a request (`mcp_session_idle`).
    pub fn with_idle(mut self, idle: Duration) -> Self {
        self.idle_seconds = i64::try_from(idle.as_secs()).unwrap_or(i64::MAX);
        self
    }

    /// Closes every idle session ([`SessionLife::idle`]); returns how many.
    pub async fn sweep(&self) -> usize {
        self.sweep_at_most(usize::MAX).await
    }

    /// Closes at most `limit` idle sessions; returns how many.
    async fn sweep_at_most(&self, limit: usize) -> usize {
        let mut idle = self.life.idle(self.idle_seconds);
        idle.truncate(limit);
        for id in &idle {
            tracing::debug!(session = %id, "closing an idle MCP session");
            if let Err(error) = self.close_session(&SessionId::from(id.as_str())).await {
                tracing::warn!(%error, "closing an idle MCP session failed");
            }
        }
        idle.len()
    }

    /// Sweeps every [`SWEEP_EVERY`], and parks every half `mcp_session_park` (one timer for
    /// all sessions, none of their own), until `stop`; then closes every session.
    pub fn start_sweeping(self: &Arc<Self>, stop: CancellationToken) {
        // Held, not weak: at `stop` the HTTP service (the other holder) may be gone already,
        // and the sessions must still be closed (parked ones have no rmcp service to end them).
        let sessions = self.clone();
        let park_every = self.parking.as_ref().map(|_| self.park_after / 2);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(SWEEP_EVERY);
            let mut park = tokio::time::interval(park_every.unwrap_or(SWEEP_EVERY));
            park.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = every.tick() => { sessions.sweep().await; }
                    _ = park.tick(), if park_every.is_some() => { sessions.park_idle(); }
                }
            }
            sessions.close_all().await;
        });
    }

    fn session(&self, id: &SessionId) -> Result<Arc<Session>, SessionsError> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner()).get(id).cloned().ok_or(SessionsError::NotFound)
    }

    /// A stream of `session` that counts as open while the client holds it.
    fn tracked(
        &self,
        session: &SessionId,
        stream: impl Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    ) -> SseStream {
        let guard = self.life.stream_opened(session);
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
        // New sessions are when memory grows, so idle ones go first: a few per new session,
        // so that the client opening it never waits for thousands of closes (the periodic sweep
        // closes the rest), while sessions still cannot pile up faster than they are opened.
        self.sweep_at_most(SWEEP_PER_NEW_SESSION).await;
        // A random v4 UUID, as rmcp's own (unguessable; never a credential all the same).
        let id = rmcp::transport::common::server_side_http::session_id();
        let (session, transport) = Session::open(id.clone(), self.log.clone(), self.parking.clone());
        let outbox: Arc<dyn Outbox> = session.clone();
        // Its relay ends when the session closes (at shutdown too: every session is closed then).
        self.scopes.open(&id, CancellationToken::new(), Arc::downgrade(&outbox));
        self.sessions.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone(), session);
        self.life.touch(&id);
        crate::telemetry::session_opened();
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.life.touch(id);
        Ok(self.session(id)?.initialize(message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.sessions.lock().unwrap_or_else(|p| p.into_inner()).contains_key(id))
    }

    // Every way a session ends comes here: DELETE, the idle sweep, shutdown, and rmcp once the
    // session's first handler stops (shutdown, or after one of these closed its input) — but
    // not when it stopped because the session parked.
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let session = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            if sessions.get(id).is_some_and(|s| s.take_worker_close()) {
                return Ok(());
            }
            let session = sessions.remove(id);
            super::shrink::map(&mut sessions);
            session
        };
        // Closed before its log goes, so that nothing it still sends is logged again.
        if let Some(session) = &session {
            session.close();
        }
        self.scopes.close(id);
        self.life.ended(id);
        self.log.end_session(id);
        self.owners.forget(id);
        // Counted once per session, however many times closing is asked for.
        if session.is_some() {
            crate::telemetry::session_closed();
            self.heap.session_closed();
        }
        Ok(())
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.life.touch(id);
        let session = self.session(id)?;
        let events = session.request(message).await?;
        let events = session_transport::request_events(events, session_transport::PRIMING_WAITS).await;
        Ok(self.tracked(id, events))
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.life.touch(id);
        Ok(self.session(id)?.accept(message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let session = self.session(id)?;
        self.log.mark_fresh_common(id);
        let stream = self.tracked(id, session_transport::events(session.standalone()?));
        Ok(self.until_draining(stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.session(id)?;
        let (common, replay) = self.log.resume(id, &last_event_id)?;
        let stream = self.tracked(id, replay);
        Ok(if common { self.until_draining(stream) } else { stream })
    }
}
