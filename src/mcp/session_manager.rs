//! rmcp's in-memory session manager, with three things changed (issue 14):
//!
//! - **Sessions live while something is open** ([`SessionLife`]): rmcp's own 5-minute idle
//!   timeout is off; a sweep closes sessions with no open stream, no waiting authorization and
//!   no request for `mcp_session_idle` (default [`session_life::IDLE_SECONDS`]). It runs when a session is created and every
//!   [`SWEEP_EVERY`].
//! - **Each event is delivered once** ([`EventLog`]): unique increasing ids; a resume replays
//!   strictly after `Last-Event-ID`, only the asking session's own events; a GET without it
//!   replays nothing old.
//! - **Stopping tells listeners to reconnect**: when the server starts to stop (`draining`),
//!   every standalone stream gets an SSE `retry:` hint and ends, so clients come back (to
//!   another instance); request streams run on until their answer.
//!
//! - **Closed sessions give their memory back** ([`HeapTrim`]): glibc keeps freed memory, so
//!   the heap is trimmed once enough sessions have closed (issue 11).
//! - **Answered requests are not kept twice**: rmcp's own cache of answered request channels
//!   is off (see [`BrokerSessions::new`]); the event log keeps them for resumption.
//!
//! `event_store()` stays `None`: with a store rmcp would also offer stateless resumption by
//! event id alone, which cannot check whose events they are.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, LocalSessionManagerError};
use rmcp::transport::streamable_http_server::session::{RestoreOutcome, ServerSseMessage, SessionId, SessionManager};
use tokio_util::sync::CancellationToken;

use super::event_log::EventLog;
use super::heap_trim::HeapTrim;
use super::session_life::{self, SessionLife};
use super::sessions::SessionRegistry;

/// How often idle sessions are looked for besides at each new session.
pub const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// How many idle sessions a new session closes before it is created.
const SWEEP_PER_NEW_SESSION: usize = 16;
/// The `retry:` hint a standalone stream ends with when the server stops: come back soon.
pub const RECONNECT_AFTER: Duration = Duration::from_secs(1);

type SseStream = Pin<Box<dyn Stream<Item = ServerSseMessage> + Send + Sync + 'static>>;

#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    #[error("cannot resume: {0}")]
    Replay(#[from] super::event_log::ReplayError),
}

pub struct BrokerSessions {
    inner: LocalSessionManager,
    log: Arc<EventLog>,
    life: Arc<SessionLife>,
    owners: Arc<SessionRegistry>,
    draining: CancellationToken,
    /// Seconds without a request after which a session with nothing open ends.
    idle_seconds: i64,
    heap: Arc<HeapTrim>,
}

impl BrokerSessions {
    pub fn new(
        log: Arc<EventLog>,
        life: Arc<SessionLife>,
        owners: Arc<SessionRegistry>,
        draining: CancellationToken,
    ) -> Self {
        let mut inner = LocalSessionManager::default().with_event_store(log.clone());
        // Our sweep decides when a session is idle (an open stream is not).
        inner.session_config.keep_alive = None;
        // rmcp keeps every answered request's channel for a late resume and scans them all on
        // each message of the session: with its default of 60 s, one busy session held ~100k
        // of them, which capped tool calls near 1k/s and held hundreds of MB (issue 11).
        // Resumes are served from our own log ([`EventLog::resume`]), never from those, so
        // they go as soon as they are answered.
        inner.session_config.completed_cache_ttl = Duration::ZERO;
        Self { inner, log, life, owners, draining, idle_seconds: session_life::IDLE_SECONDS, heap: Arc::default() }
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

    /// Sweeps every [`SWEEP_EVERY`] until `stop`.
    pub fn start_sweeping(self: &Arc<Self>, stop: CancellationToken) {
        let sessions = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(SWEEP_EVERY);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = every.tick() => {}
                }
                let Some(sessions) = sessions.upgrade() else { return };
                sessions.sweep().await;
            }
        });
    }

    /// A stream of `session` that counts as open while the client holds it, and records that
    /// its events are this session's.
    fn tracked(
        &self,
        session: &SessionId,
        stream: impl Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    ) -> SseStream {
        let guard = self.life.stream_opened(session);
        let (log, owner) = (self.log.clone(), session.to_string());
        Box::pin(stream.map(move |event| {
            let _open = &guard;
            if let Some(id) = &event.event_id {
                log.claim(id, &owner);
            }
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
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        // New sessions are when memory grows, so idle ones go first: a few per new session,
        // so that the client opening it never waits for thousands of closes (the periodic sweep
        // closes the rest), while sessions still cannot pile up faster than they are opened.
        self.sweep_at_most(SWEEP_PER_NEW_SESSION).await;
        let (id, transport) = self.inner.create_session().await?;
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
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.life.ended(id);
        self.log.end_session(id);
        self.owners.forget(id);
        // Counted once per session, however many times closing is asked for.
        if self.inner.has_session(id).await? {
            crate::telemetry::session_closed();
            self.heap.session_closed();
        }
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.life.touch(id);
        let stream = self.inner.create_stream(id, message).await?;
        Ok(self.tracked(id, stream))
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.life.touch(id);
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.log.mark_fresh_common(id);
        let stream = self.inner.create_standalone_stream(id).await?;
        let stream = self.tracked(id, stream);
        Ok(self.until_draining(stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        if !self.inner.has_session(id).await? {
            return Err(LocalSessionManagerError::SessionNotFound(id.clone()).into());
        }
        let (common, replay) = self.log.resume(id, &last_event_id)?;
        let stream = self.tracked(id, replay);
        Ok(if common { self.until_draining(stream) } else { stream })
    }

    async fn restore_session(&self, id: SessionId) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        Ok(self.inner.restore_session(id).await?)
    }
}
