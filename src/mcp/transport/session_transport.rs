//! One MCP session's transport, without a task of its own.
//!
//! rmcp's `LocalSessionManager` puts a worker task between the HTTP service and each session's
//! handler, talking to both over channels of unboxed messages; a tokio channel allocates its
//! first block of 32 slots when it opens, and with messages of a few hundred bytes that was
//! most of the ~75 KB an idle session cost. Here there is no worker: what the handler sends is
//! routed in the handler's own task as it is sent ([`Routes`]), logged for resumption (in the
//! session's entry of the session table, [`EventSink`]) and pushed onto the SSE stream it
//! belongs to. The only channels are one for
//! the client's messages to the handler and one per open stream, and both carry boxes (8-byte
//! slots). An answer ends its request's stream and nothing of the stream stays here (the log
//! keeps its events for a late resume): rmcp kept answered streams for 60 s and scanned them
//! on every message, which capped a busy session near 1k tool calls/s.
//!
//! A stream that falls [`STREAM_BACKLOG`] events behind (its client stopped reading) is ended
//! rather than allowed to grow: its events stay in the log, so the client resumes with
//! `Last-Event-ID`. One standalone (GET) stream receives at a time; a second one opened while
//! the first still listens only keeps its connection (as rmcp's "shadow" streams do), so
//! competing reconnections do not take each other's messages.
//!
//! A session with nothing in flight is **parked** ([`Session::park`]): its input
//! ends, so its rmcp service (two channels of unboxed messages, a task, a peer: most of what an
//! idle session cost) stops, and the session keeps only what it needs to come back: the
//! client's `initialize` parameters, its streams and its log (its per-session state is in
//! [`crate::mcp::session::scope`]). The GET stream stays open and still receives what is sent
//! through the session itself ([`Session::notify`]). The next client message starts a new
//! service first ([`Reviver`], skipping the handshake). The server's request ids stay unique
//! across services ([`ServerRequestIds`]).
//!
//! Each session's transport belongs to its entry in the session table
//! ([`crate::mcp::session::table`]), and logs into that entry while holding its own lock (so
//! the table never calls into a transport under the table's lock). Its phase (running, parked, closed) and that of its first
//! service, which rmcp's own worker runs and closes the session after ([`FirstService`]),
//! decide whether a service that stops ends the session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use futures::Stream;
use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, InitializeRequestParams, RequestId, ServerJsonRpcMessage, ServerNotification, ServerResult,
};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};
use tokio::sync::{mpsc, oneshot};

use super::event_log::{EventSink, KEPT_PER_STREAM};
use super::request_ids::{Generation, ServerRequestIds};
use super::routes::{Route, Routes, StreamNo};
use crate::mcp::session::scope::Outbox;

/// Events a stream may hold for a client that does not read before it is ended; the log keeps
/// as many, so resuming loses nothing.
pub const STREAM_BACKLOG: usize = KEPT_PER_STREAM;
/// Client messages waiting for the handler before the HTTP request that brings one waits.
const TO_HANDLER: usize = 16;
/// Standalone streams that only keep their connection, at most (the oldest goes first).
const MAX_SHADOWS: usize = 32;
/// The reconnection hint of each request stream's priming event (SEP-1699), as rmcp's.
pub const REQUEST_STREAM_RETRY: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The session was closed (DELETE, idle sweep, shutdown) or its handler stopped.
    #[error("the session is closed")]
    Closed,
}

/// The SSE events of one stream, as the HTTP response reads them.
pub type Events = mpsc::Receiver<Box<ServerSseMessage>>;

/// A running rmcp service; dropping it stops the service.
pub type ServiceGuard = Box<dyn Send>;

/// Starts a new service for a parked session on `transport`, without the handshake (the
/// client's `initialize` parameters are given).
pub type Reviver = Arc<dyn Fn(SessionTransport, InitializeRequestParams) -> ServiceGuard + Send + Sync>;

/// How sessions park: what starts a parked session's new service, and how many are parked.
#[derive(Clone)]
pub struct Parking {
    pub reviver: Reviver,
    pub parked: Arc<ParkedCount>,
}

/// Sessions parked now, in one app (the `oauth_broker_mcp_sessions_parked` gauge is the
/// process's).
#[derive(Debug, Default)]
pub struct ParkedCount(AtomicUsize);

impl ParkedCount {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    fn parked(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
        crate::telemetry::session_parked();
    }

    fn unparked(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
        crate::telemetry::session_unparked();
    }
}

/// The handler's input.
type ToHandler = mpsc::Sender<Box<ClientJsonRpcMessage>>;

/// A new service to start for a parked session: its transport and the client's `initialize`
/// parameters.
type Revival = (SessionTransport, InitializeRequestParams);

/// A session: shared by the session manager (HTTP side) and its [`SessionTransport`].
pub struct Session {
    id: SessionId,
    /// Where its events are logged: the session table (weak, as the table holds the session).
    log: Weak<dyn EventSink>,
    parking: Option<Parking>,
    inner: Mutex<Inner>,
}

/// Whether a session has a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    Parked,
    Closed,
}

struct Inner {
    phase: Phase,
    /// The service that reads `to_handler`: 0 is the one rmcp started, then one per revival.
    generation: Generation,
    /// `Some` while running: closed (the handler reads the end of its input) to park or close.
    to_handler: Option<ToHandler>,
    /// The service this session started (not rmcp's first one, which rmcp's worker holds).
    service: Option<ServiceGuard>,
    /// The `initialize` request waiting for its answer, which goes back to the HTTP service.
    initialize: Option<(RequestId, oneshot::Sender<ServerJsonRpcMessage>)>,
    /// The client's `initialize` parameters until the answer names the version.
    initializing: Option<Box<InitializeRequestParams>>,
    /// What a revived service is given instead of the handshake; `None` until initialized.
    peer_info: Option<Box<InitializeRequestParams>>,
    /// Client messages on their way to the handler.
    sending: usize,
    /// The last message either way.
    last_message: Instant,
    /// rmcp's own worker closes the session when the first service stops: once that service
    /// stopped for parking, that close is not a close ([`Session::closed_by_rmcp_worker`]).
    first_service: FirstService,
    server_requests: ServerRequestIds,
    routes: Routes,
    requests: HashMap<StreamNo, Outlet>,
    standalone: Option<Outlet>,
    shadows: Vec<mpsc::Sender<Box<ServerSseMessage>>>,
}

/// The session's first service, which rmcp's worker runs and after which it closes the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FirstService {
    /// Still the service, or stopped with the session: rmcp's close is a close.
    Serving,
    /// Stopped while the session lives on (parked, or a newer service took over): rmcp's close,
    /// when it comes, is not one.
    StoppedForParking,
    /// rmcp's close came and was skipped; any later close is a close.
    CloseSkipped,
}

/// The sending end of one stream, with its name in the log.
struct Outlet {
    /// `None` once the stream ended (its client fell too far behind).
    tx: Option<mpsc::Sender<Box<ServerSseMessage>>>,
    log_id: String,
}

impl Outlet {
    fn open(log_id: String) -> (Self, Events) {
        let (tx, rx) = mpsc::channel(STREAM_BACKLOG);
        (Self { tx: Some(tx), log_id }, rx)
    }

    fn is_listening(&self) -> bool {
        self.tx.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    fn push(&mut self, event: ServerSseMessage) {
        let Some(tx) = &self.tx else { return };
        match tx.try_send(Box::new(event)) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::debug!(stream = %self.log_id, "an SSE client fell behind; its stream ends and it resumes");
                self.tx = None;
            }
        }
    }
}

/// Decrements [`Inner::sending`] once the message is with the handler (or the HTTP request
/// that brought it went away).
struct Sending<'a>(&'a Session);

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        let mut inner = self.0.inner();
        inner.sending -= 1;
        inner.last_message = Instant::now();
    }
}

impl Session {
    /// A new session and the transport its first handler runs on, logging its events into
    /// `log`. Without `parking` it is never parked.
    pub fn open(id: SessionId, log: Weak<dyn EventSink>, parking: Option<Parking>) -> (Arc<Self>, SessionTransport) {
        let (to_handler, from_client) = mpsc::channel(TO_HANDLER);
        let inner = Inner {
            phase: Phase::Running,
            generation: 0,
            to_handler: Some(to_handler),
            service: None,
            initialize: None,
            initializing: None,
            peer_info: None,
            sending: 0,
            last_message: Instant::now(),
            first_service: FirstService::Serving,
            server_requests: ServerRequestIds::default(),
            routes: Routes::default(),
            requests: HashMap::new(),
            standalone: None,
            shadows: Vec::new(),
        };
        let session = Arc::new(Self { id, log, parking, inner: Mutex::new(inner) });
        (session.clone(), SessionTransport { session, from_client, generation: 0 })
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The handler's input, and a service to start first when the session was parked.
    fn to_handler(self: &Arc<Self>, inner: &mut Inner) -> Result<(ToHandler, Option<Revival>), SessionError> {
        match inner.phase {
            Phase::Closed => Err(SessionError::Closed),
            Phase::Running => Ok((inner.to_handler.clone().ok_or(SessionError::Closed)?, None)),
            Phase::Parked => {
                let peer_info = inner.peer_info.as_deref().cloned().ok_or(SessionError::Closed)?;
                let (to_handler, from_client) = mpsc::channel(TO_HANDLER);
                inner.generation += 1;
                inner.phase = Phase::Running;
                inner.to_handler = Some(to_handler.clone());
                let transport = SessionTransport { session: self.clone(), from_client, generation: inner.generation };
                if let Some(parking) = &self.parking {
                    parking.parked.unparked();
                }
                Ok((to_handler, Some((transport, peer_info))))
            }
        }
    }

    /// Sends a client message to the handler, starting a service first if the session was
    /// parked. `_sending` was counted with the lock that gave `to_handler`.
    async fn hand_over(
        &self,
        _sending: Sending<'_>,
        to_handler: ToHandler,
        revive: Option<Revival>,
        message: ClientJsonRpcMessage,
    ) -> Result<(), SessionError> {
        if let Some((transport, peer_info)) = revive {
            let generation = transport.generation;
            tracing::debug!(session = %self.id, generation, "reviving a parked MCP session");
            let parking = self.parking.as_ref().ok_or(SessionError::Closed)?;
            let service = (parking.reviver)(transport, peer_info);
            let mut inner = self.inner();
            // Closed meanwhile: the service stops as it drops (after the lock is released).
            let stale = inner.phase != Phase::Running || inner.generation != generation;
            let service = if stale { Some(service) } else { inner.service.replace(service) };
            drop(inner);
            drop(service);
        }
        to_handler.send(Box::new(message)).await.map_err(|_| SessionError::Closed)
    }

    /// Hands the `initialize` request to the handler and returns its answer.
    pub async fn initialize(
        self: &Arc<Self>,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, SessionError> {
        let (answer, answered) = oneshot::channel();
        let (to_handler, revive) = {
            let mut inner = self.inner();
            if let ClientJsonRpcMessage::Request(request) = &message {
                inner.initialize = Some((request.id.clone(), answer));
                if let rmcp::model::ClientRequest::InitializeRequest(init) = &request.request {
                    inner.initializing = Some(Box::new(init.params.clone()));
                }
            }
            let handed = self.to_handler(&mut inner)?;
            inner.sending += 1;
            handed
        };
        self.hand_over(Sending(self), to_handler, revive, message).await?;
        answered.await.map_err(|_| SessionError::Closed)
    }

    /// A client request on a new stream, which starts with a priming event (SEP-1699) and
    /// ends with the request's answer.
    pub async fn request(self: &Arc<Self>, message: ClientJsonRpcMessage) -> Result<Events, SessionError> {
        let ClientJsonRpcMessage::Request(request) = &message else {
            // rmcp's HTTP service sends only requests here; anything else has no answer.
            self.accept(message).await?;
            return Ok(mpsc::channel(1).1);
        };
        let (stream, events, to_handler, revive) = {
            let mut inner = self.inner();
            let (to_handler, revive) = self.to_handler(&mut inner)?;
            inner.sending += 1;
            let stream = inner.routes.open(request);
            let (mut outlet, events) = Outlet::open(format!("{}/{stream}", self.id));
            let priming = self.logged(&outlet.log_id, ServerSseMessage::retry(REQUEST_STREAM_RETRY));
            outlet.push(priming);
            inner.requests.insert(stream, outlet);
            (stream, events, to_handler, revive)
        };
        if self.hand_over(Sending(self), to_handler, revive, message).await.is_err() {
            self.end_request(stream);
            return Err(SessionError::Closed);
        }
        Ok(events)
    }

    /// A client notification, or its answer to a request of ours, for the handler.
    pub async fn accept(self: &Arc<Self>, mut message: ClientJsonRpcMessage) -> Result<(), SessionError> {
        let (to_handler, revive) = {
            let mut inner = self.inner();
            // A cancelled request's stream ends now (its answer, if any, is not awaited).
            if let Some(stream) = inner.routes.cancelled(&message) {
                inner.end_request(stream);
            }
            if inner.phase == Phase::Closed {
                return Err(SessionError::Closed);
            }
            // An answer goes to the service that asked, under the id it asked with.
            if let Some(seen) = answer_id(&mut message) {
                let current = inner.generation;
                match inner.server_requests.answered(current, seen) {
                    Some(own) => *seen = own,
                    None => return Ok(()),
                }
            }
            let handed = self.to_handler(&mut inner)?;
            inner.sending += 1;
            handed
        };
        self.hand_over(Sending(self), to_handler, revive, message).await
    }

    /// The standalone stream (GET without `Last-Event-ID`): it receives what relates to no
    /// request, unless another one still listens (then it only keeps its connection).
    pub fn standalone(&self) -> Result<Events, SessionError> {
        let mut inner = self.inner();
        if inner.phase == Phase::Closed {
            return Err(SessionError::Closed);
        }
        if inner.standalone.as_ref().is_some_and(Outlet::is_listening) {
            inner.shadows.retain(|tx| !tx.is_closed());
            if inner.shadows.len() >= MAX_SHADOWS {
                inner.shadows.remove(0);
            }
            let (tx, rx) = mpsc::channel(1);
            inner.shadows.push(tx);
            return Ok(rx);
        }
        let (outlet, events) = Outlet::open(format!("{}:common", self.id));
        inner.standalone = Some(outlet);
        Ok(events)
    }

    /// Sends what service `generation`'s handler sent on the stream it belongs to.
    fn deliver(&self, generation: Generation, mut message: ServerJsonRpcMessage) -> Result<(), SessionError> {
        let mut inner = self.inner();
        let inner = &mut *inner;
        if inner.phase == Phase::Closed {
            return Err(SessionError::Closed);
        }
        if generation != inner.generation {
            // A stopped service has nothing in flight when it stops; nothing of it goes out.
            tracing::debug!(session = %self.id, generation, "a message of a stopped service; dropped");
            return Ok(());
        }
        inner.last_message = Instant::now();
        if let Some((id, _)) = &inner.initialize
            && answers(&message, id)
            && let Some((_, answer)) = inner.initialize.take()
        {
            if let (Some(mut params), ServerJsonRpcMessage::Response(response)) = (inner.initializing.take(), &message)
                && let ServerResult::InitializeResult(result) = &response.result
            {
                // As rmcp's handshake does: the peer info carries the negotiated version.
                params.protocol_version = result.protocol_version.clone();
                inner.peer_info = Some(params);
            }
            return answer.send(message).map_err(|_| SessionError::Closed);
        }
        match &mut message {
            // The client sees ids unique for the session, whichever service asks.
            ServerJsonRpcMessage::Request(request) => {
                request.id = inner.server_requests.outgoing(generation, request.id.clone());
            }
            ServerJsonRpcMessage::Notification(note) => {
                if let ServerNotification::CancelledNotification(cancelled) = &mut note.notification
                    && let Some(id) = &cancelled.params.request_id
                    && let Some(seen) = inner.server_requests.seen_as(generation, id)
                {
                    inner.server_requests.answered(generation, &seen);
                    cancelled.params.request_id = Some(seen);
                }
            }
            _ => {}
        }
        self.route(inner, message);
        Ok(())
    }

    fn route(&self, inner: &mut Inner, message: ServerJsonRpcMessage) {
        let route = inner.routes.route(&message);
        let event = ServerSseMessage::from_message(message);
        match route {
            Route::Request { stream, last } => {
                if let Some(outlet) = inner.requests.get_mut(&stream) {
                    let event = self.logged(&outlet.log_id, event);
                    outlet.push(event);
                }
                if last {
                    inner.end_request(stream);
                }
            }
            Route::Standalone => {
                let log_id = format!("{}:common", self.id);
                let event = self.logged(&log_id, event);
                if let Some(outlet) = &mut inner.standalone {
                    outlet.push(event);
                }
            }
        }
    }

    /// The event with the id the log gave it (`0` once the table is gone: the server stopped).
    fn logged(&self, log_id: &str, mut event: ServerSseMessage) -> ServerSseMessage {
        let id = self.log.upgrade().map_or(0, |log| log.append(&self.id, log_id, &event));
        event.event_id = Some(id.to_string());
        event
    }

    fn end_request(&self, stream: StreamNo) {
        let mut inner = self.inner();
        inner.end_request(stream);
        inner.last_message = Instant::now();
    }

    /// Stops the session's service if nothing has been in flight for `after`: no client
    /// request waiting for its answer, no request of ours waiting for the client's, no client
    /// message on its way to the handler, and no message either way for `after`. Returns
    /// whether it parked.
    pub fn park(&self, after: Duration) -> bool {
        let service = {
            let mut inner = self.inner();
            let quiet = inner.phase == Phase::Running
                && self.parking.is_some()
                && inner.peer_info.is_some()
                && inner.initialize.is_none()
                && inner.sending == 0
                && inner.routes.is_empty()
                && inner.server_requests.is_empty()
                && inner.to_handler.as_ref().is_some_and(|tx| tx.capacity() == tx.max_capacity())
                && inner.last_message.elapsed() >= after;
            if !quiet {
                return false;
            }
            inner.phase = Phase::Parked;
            // Its input ends: the service's loop stops, and its handler with it.
            inner.to_handler = None;
            let generation = inner.generation;
            inner.server_requests.forget(generation);
            inner.service.take()
        };
        drop(service);
        if let Some(parking) = &self.parking {
            parking.parked.parked();
        }
        tracing::debug!(session = %self.id, "parked an idle MCP session");
        true
    }

    pub fn is_parked(&self) -> bool {
        self.inner().phase == Phase::Parked
    }

    /// Service `generation` stopped (its transport closed). Returns whether the session ends
    /// with it: not when the session parked or a newer service took over.
    fn service_stopped(&self, generation: Generation) -> bool {
        let mut inner = self.inner();
        match inner.phase {
            Phase::Closed => false,
            Phase::Running if inner.generation == generation => true,
            _ => {
                // rmcp's worker runs the first service only, and closes the session after it.
                if generation == 0 {
                    inner.first_service = FirstService::StoppedForParking;
                }
                false
            }
        }
    }

    /// Whether this close is rmcp's worker's, after the first service stopped for parking
    /// (then the session stays). Asked once.
    pub fn closed_by_rmcp_worker(&self) -> bool {
        let mut inner = self.inner();
        let skipped = inner.first_service == FirstService::StoppedForParking;
        if skipped {
            inner.first_service = FirstService::CloseSkipped;
        }
        skipped
    }

    /// Ends every stream, and the handler's input; later sends fail.
    pub fn close(&self) {
        let (was_parked, service) = {
            let mut inner = self.inner();
            let was_parked = inner.phase == Phase::Parked;
            inner.phase = Phase::Closed;
            inner.to_handler = None;
            inner.initialize = None;
            inner.peer_info = None;
            inner.routes = Routes::default();
            inner.requests.clear();
            inner.standalone = None;
            inner.shadows.clear();
            (was_parked, inner.service.take())
        };
        drop(service);
        if was_parked && let Some(parking) = &self.parking {
            parking.parked.unparked();
        }
    }
}

impl Outbox for Session {
    // What belongs to no request (completions, list changes, resource updates) goes on the
    // GET stream whether or not a service runs.
    fn notify(&self, notification: ServerNotification) -> bool {
        let mut inner = self.inner();
        if inner.phase == Phase::Closed {
            return false;
        }
        self.route(&mut inner, ServerJsonRpcMessage::notification(notification));
        true
    }
}

impl Inner {
    fn end_request(&mut self, stream: StreamNo) {
        self.routes.close(stream);
        self.requests.remove(&stream);
    }
}

/// Whether `message` is the answer to request `id`.
fn answers(message: &ServerJsonRpcMessage, id: &RequestId) -> bool {
    match message {
        ServerJsonRpcMessage::Response(response) => &response.id == id,
        ServerJsonRpcMessage::Error(error) => error.id.as_ref() == Some(id),
        _ => false,
    }
}

/// The id a client's answer names, if it is one.
fn answer_id(message: &mut ClientJsonRpcMessage) -> Option<&mut RequestId> {
    match message {
        ClientJsonRpcMessage::Response(response) => Some(&mut response.id),
        ClientJsonRpcMessage::Error(error) => error.id.as_mut(),
        _ => None,
    }
}

/// The SSE events of a stream as a `Stream`.
pub fn events(mut events: Events) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
    futures::stream::poll_fn(move |cx| events.poll_recv(cx).map(|event| event.map(|e| *e)))
}

/// How long a request stream's priming event waits for the next event (most often the answer)
/// before it is sent alone. Long beside a quick call on a busy server (a fraction of a
/// millisecond; a few at the 99th percentile), short beside anything a person or a network
/// would notice.
pub const PRIMING_WAITS: Duration = Duration::from_millis(10);

/// The events of a request stream ([`Session::request`]), returned once its priming event can
/// go out together with the next one, or after `wait` without it.
///
/// The HTTP response starts when this returns, and hyper writes what the body has ready in
/// one go: a quick call's headers, priming event and answer leave in one write, where sending
/// the priming event at once took two (headers and priming, then the answer): one system call
/// and one loopback packet more per call, on both ends. A call that takes longer
/// gets its priming event after `wait`, as its reconnection point (SEP-1699).
pub async fn request_events(
    mut events: Events,
    wait: Duration,
) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
    use futures::StreamExt;
    let mut ready = Vec::with_capacity(2);
    // Already queued: `Session::request` pushes it before it returns.
    if let Some(priming) = events.recv().await {
        ready.push(*priming);
        if let Ok(Some(next)) = tokio::time::timeout(wait, events.recv()).await {
            ready.push(*next);
        }
    }
    futures::stream::iter(ready).chain(self::events(events))
}

/// What one rmcp service loop of a session reads from and writes to.
pub struct SessionTransport {
    session: Arc<Session>,
    from_client: mpsc::Receiver<Box<ClientJsonRpcMessage>>,
    generation: Generation,
}

impl Transport<RoleServer> for SessionTransport {
    type Error = SessionError;

    // Routed here, as the service loop hands it over, so messages keep the order it sent them in.
    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        std::future::ready(self.session.deliver(self.generation, item))
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        self.from_client.recv().await.map(|message| *message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        // Parking ends a service but not its session; anything else (shutdown) ends both.
        if self.session.service_stopped(self.generation) {
            self.session.close();
        }
        std::future::ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use futures::{FutureExt, StreamExt};
    use rmcp::model::{ClientNotification, ErrorData, ServerNotification, ServerRequest, ServerResult};
    use rmcp::service::OriginatingRequestId;
    use serde_json::json;

    use super::*;
    use crate::clock::ManualClock;
    use crate::mcp::session::SessionTable;

    /// Session `s1`, open in a session table, which keeps its log: hold it (the session only
    /// refers to it).
    fn open() -> (Arc<Session>, SessionTransport, Arc<SessionTable>) {
        let log = Arc::new(SessionTable::new(Arc::new(ManualClock::new(1_000))));
        let (session, _, transport) = log.open_for_test("s1");
        (session, transport, log)
    }

    fn client(value: serde_json::Value) -> ClientJsonRpcMessage {
        serde_json::from_value(value).unwrap()
    }

    fn call(id: i64) -> ClientJsonRpcMessage {
        client(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "list_connections", "_meta": {"progressToken": format!("p{id}")}}}))
    }

    fn answer(id: i64) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::response(ServerResult::empty(()), RequestId::Number(id))
    }

    fn changed() -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::notification(ServerNotification::PromptListChangedNotification(Default::default()))
    }

    /// The method of each event's message (`retry` for a priming event).
    async fn methods(events: Events, n: usize) -> Vec<String> {
        let kind = |e: ServerSseMessage| match e.message.as_deref() {
            None => "retry".to_owned(),
            Some(ServerJsonRpcMessage::Response(_)) => "answer".to_owned(),
            Some(message) => serde_json::to_value(message).unwrap()["method"].as_str().unwrap().to_owned(),
        };
        super::events(events).take(n).map(kind).collect().await
    }

    #[tokio::test]
    async fn the_initialize_answer_goes_back_to_the_http_service() {
        let (session, mut transport, log) = open();
        let init = client(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
        let handler = async {
            assert!(transport.receive().await.is_some());
            transport.send(answer(1)).await.unwrap();
        };
        let (answered, ()) = tokio::join!(session.initialize(init), handler);
        assert!(matches!(answered.unwrap(), ServerJsonRpcMessage::Response(_)));
        assert_eq!(log.stream_count(), 0, "not an SSE event of any stream");
    }

    #[tokio::test]
    async fn a_request_stream_is_primed_carries_its_own_messages_and_ends_with_its_answer() {
        let (session, mut transport, _log) = open();
        let standalone = session.standalone().unwrap();
        let events = session.request(call(7)).await.unwrap();
        assert!(transport.receive().await.is_some(), "the request reached the handler");

        let progress: ServerJsonRpcMessage = serde_json::from_value(json!({"jsonrpc": "2.0",
            "method": "notifications/progress", "params": {"progressToken": "p7", "progress": 1}}))
        .unwrap();
        let mut asked = ServerRequest::PingRequest(Default::default());
        rmcp::model::GetExtensions::extensions_mut(&mut asked).insert(OriginatingRequestId(RequestId::Number(7)));
        for message in [progress, ServerJsonRpcMessage::request(asked, RequestId::Number(0)), changed(), answer(7)] {
            transport.send(message).await.unwrap();
        }

        assert_eq!(
            methods(events, 10).await,
            ["retry", "notifications/progress", "ping", "answer"],
            "and then the stream ends"
        );
        assert_eq!(methods(standalone, 1).await, ["notifications/prompts/list_changed"]);
    }

    /// A wait no test reaches: returning before it proves the event, not the time, ended it.
    const FOREVER: Duration = Duration::from_secs(3600);

    /// An answer within the wait: the priming event and the answer are both ready as soon as
    /// the stream is handed over (one write), without waiting the wait out.
    #[tokio::test]
    async fn a_quick_answer_goes_out_with_the_priming_event() {
        let (session, mut transport, _log) = open();
        let events = session.request(call(7)).await.unwrap();
        assert!(transport.receive().await.is_some(), "the request reached the handler");

        let mut handing_over = std::pin::pin!(request_events(events, FOREVER));
        assert!((&mut handing_over).now_or_never().is_none(), "the priming event waits for the answer");
        transport.send(answer(7)).await.unwrap();
        let stream = handing_over.await;

        let mut stream = std::pin::pin!(stream);
        let first = stream.next().now_or_never().flatten().expect("the priming event, ready");
        assert!(first.message.is_none() && first.retry.is_some(), "a priming event: {first:?}");
        let second = stream.next().now_or_never().flatten().expect("the answer, ready with it");
        assert!(matches!(second.message.as_deref(), Some(ServerJsonRpcMessage::Response(_))));
        assert_ne!(first.event_id, second.event_id);
        assert!(stream.next().now_or_never().expect("ready").is_none(), "the stream ends with its answer");
    }

    /// No answer within the wait: the priming event goes alone (the client's point to resume
    /// from), and the answer follows when it comes.
    #[tokio::test]
    async fn a_slow_calls_priming_event_goes_alone_once_the_wait_is_over() {
        let (session, mut transport, _log) = open();
        let events = session.request(call(7)).await.unwrap();
        assert!(transport.receive().await.is_some(), "the request reached the handler");

        let mut stream = std::pin::pin!(request_events(events, Duration::ZERO).await);

        let first = stream.next().now_or_never().flatten().expect("the priming event, ready");
        assert!(first.message.is_none() && first.event_id.is_some(), "a priming event with its id: {first:?}");
        assert!(stream.next().now_or_never().is_none(), "nothing else yet");
        transport.send(answer(7)).await.unwrap();
        let second = stream.next().await.expect("the answer");
        assert!(matches!(second.message.as_deref(), Some(ServerJsonRpcMessage::Response(_))));
        assert!(stream.next().await.is_none());
    }

    /// A session that closes during the wait: the priming event, then the end.
    #[tokio::test]
    async fn a_stream_that_ends_during_the_wait_ends_after_its_priming_event() {
        let (session, _transport, _log) = open();
        let events = session.request(call(7)).await.unwrap();
        let (stream, ()) = tokio::join!(request_events(events, FOREVER), async { session.close() });
        let all: Vec<_> = stream.collect().await;
        assert_eq!(all.len(), 1, "{all:?}");
        assert!(all[0].message.is_none());
    }

    #[tokio::test]
    async fn a_second_standalone_stream_only_keeps_its_connection_while_the_first_listens() {
        let (session, mut transport, _log) = open();
        let first = session.standalone().unwrap();
        let mut second = session.standalone().unwrap();
        transport.send(changed()).await.unwrap();
        assert!(second.try_recv().is_err(), "nothing for the second");
        drop(first);
        let third = session.standalone().unwrap();
        transport.send(changed()).await.unwrap();
        assert_eq!(methods(third, 1).await, ["notifications/prompts/list_changed"], "the new one listens");
    }

    #[tokio::test]
    async fn a_cancelled_requests_stream_ends_and_the_handler_hears_of_it() {
        let (session, mut transport, _log) = open();
        let events = session.request(call(3)).await.unwrap();
        session
            .accept(client(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}})))
            .await
            .unwrap();
        assert_eq!(methods(events, 10).await, ["retry"]);
        transport.receive().await.unwrap();
        let cancelled = transport.receive().await.unwrap();
        assert!(matches!(
            cancelled,
            ClientJsonRpcMessage::Notification(n) if matches!(n.notification, ClientNotification::CancelledNotification(_))
        ));
        let late = ServerJsonRpcMessage::error(ErrorData::internal_error("late", None), Some(RequestId::Number(3)));
        transport.send(late).await.unwrap();
    }

    #[tokio::test]
    async fn a_client_that_stops_reading_loses_its_stream_but_not_its_events() {
        let (session, mut transport, log) = open();
        let standalone = session.standalone().unwrap();
        for _ in 0..STREAM_BACKLOG + 5 {
            transport.send(changed()).await.unwrap();
        }
        let got: Vec<ServerSseMessage> = super::events(standalone).collect().await;
        assert_eq!(got.len(), STREAM_BACKLOG, "the stream ended instead of growing");
        let last = got.last().and_then(|e| e.event_id.clone()).unwrap();
        let (_, rest) = log.resume("s1", &last).unwrap();
        assert_eq!(rest.take(5).count().await, 5, "the rest are there to resume");
    }

    #[tokio::test]
    async fn closing_ends_every_stream_and_the_handlers_input() {
        let (session, mut transport, _log) = open();
        let standalone = session.standalone().unwrap();
        let request = session.request(call(1)).await.unwrap();
        transport.receive().await.unwrap();

        session.close();

        assert!(transport.receive().await.is_none(), "the handler stops");
        assert!(transport.send(changed()).await.is_err());
        assert_eq!(methods(standalone, 10).await, Vec::<String>::new());
        assert_eq!(methods(request, 10).await, ["retry"]);
        assert!(session.request(call(2)).await.is_err());
        assert!(session.standalone().is_err());
    }

    /// A session that parks, whose revivals hand their transport to the test.
    fn parking()
    -> (Arc<Session>, SessionTransport, mpsc::UnboundedReceiver<Revival>, Arc<ParkedCount>, Arc<SessionTable>) {
        let log = Arc::new(SessionTable::new(Arc::new(ManualClock::new(1_000))));
        let (revived, revivals) = mpsc::unbounded_channel();
        let reviver: Reviver = Arc::new(move |transport, peer_info| {
            revived.send((transport, peer_info)).unwrap();
            Box::new(())
        });
        let parked = Arc::new(ParkedCount::default());
        let parking = Parking { reviver, parked: parked.clone() };
        let (session, _, transport) = log.open_parking_for_test("s1", Some(parking));
        (session, transport, revivals, parked, log)
    }

    /// Initializes the session: the client asks for a version the handler answers with another.
    async fn initialized(session: &Arc<Session>, transport: &mut SessionTransport) {
        let init = client(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2099-01-01", "capabilities": {"elicitation": {"url": {}}},
            "clientInfo": {"name": "t", "version": "1"}}}));
        let result: ServerJsonRpcMessage = serde_json::from_value(json!({"jsonrpc": "2.0", "id": 1, "result": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "b", "version": "1"}}}))
        .unwrap();
        let handler = async {
            transport.receive().await.unwrap();
            transport.send(result).await.unwrap();
        };
        let (answered, ()) = tokio::join!(session.initialize(init), handler);
        answered.unwrap();
    }

    fn ask(id: i64) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::request(ServerRequest::PingRequest(Default::default()), RequestId::Number(id))
    }

    /// The message of the next event of a stream, as JSON.
    async fn next_json(events: &mut Events) -> serde_json::Value {
        let event = events.recv().await.unwrap();
        serde_json::to_value(event.message.as_deref().unwrap()).unwrap()
    }

    #[tokio::test]
    async fn a_session_parks_only_with_nothing_in_flight_and_its_stream_still_receives() {
        let (session, mut transport, _, parked, _log) = parking();
        assert!(!session.park(Duration::ZERO), "not before it is initialized");
        initialized(&session, &mut transport).await;
        let mut standalone = session.standalone().unwrap();

        // A client request waiting for its answer, then a request of ours waiting for the client's.
        let _events = session.request(call(2)).await.unwrap();
        transport.receive().await.unwrap();
        assert!(!session.park(Duration::ZERO));
        transport.send(ask(0)).await.unwrap();
        transport.send(answer(2)).await.unwrap();
        assert!(!session.park(Duration::ZERO), "the client has not answered");
        let seen = next_json(&mut standalone).await["id"].clone();
        session.accept(client(json!({"jsonrpc": "2.0", "id": seen, "result": {}}))).await.unwrap();
        assert!(transport.receive().await.is_some(), "the answer reached the handler");
        assert!(!session.park(Duration::from_secs(3600)), "nor is it quiet for long enough");

        assert!(session.park(Duration::ZERO));
        assert!(transport.receive().await.is_none(), "the service's input ended");
        assert_eq!(parked.get(), 1);
        assert!(session.notify(ServerNotification::PromptListChangedNotification(Default::default())));
        assert_eq!(methods(standalone, 1).await, ["notifications/prompts/list_changed"]);
    }

    #[tokio::test]
    async fn the_next_message_revives_a_parked_session_once_and_request_ids_do_not_repeat() {
        let (session, mut transport, mut revivals, parked, _log) = parking();
        initialized(&session, &mut transport).await;
        let mut standalone = session.standalone().unwrap();
        transport.send(ask(0)).await.unwrap();
        let first = next_json(&mut standalone).await["id"].clone();
        session.accept(client(json!({"jsonrpc": "2.0", "id": first, "result": {}}))).await.unwrap();
        transport.receive().await.unwrap();
        assert!(session.park(Duration::ZERO));
        // The first service stops: its transport closes, and rmcp's worker then closes the
        // session, which must stay.
        transport.close().await.unwrap();
        assert!(session.closed_by_rmcp_worker() && !session.closed_by_rmcp_worker(), "asked once");

        // Act: two messages.
        let _events = session.request(call(2)).await.unwrap();
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": "x", "progress": 1}});
        session.accept(client(progress)).await.unwrap();

        // Assert: one new service, given the negotiated version and the client's capabilities,
        // receiving both in order.
        let (mut revived, peer_info) = revivals.try_recv().unwrap();
        assert!(revivals.try_recv().is_err(), "one new service for both messages");
        assert_eq!(peer_info.protocol_version.as_str(), "2025-11-25");
        assert!(peer_info.capabilities.elicitation.is_some_and(|e| e.url.is_some()));
        assert_eq!(parked.get(), 0);
        assert!(matches!(revived.receive().await, Some(ClientJsonRpcMessage::Request(_))));
        assert!(matches!(revived.receive().await, Some(ClientJsonRpcMessage::Notification(_))));

        // Its first request (its own id 0 again) reaches the client under a new id; an answer
        // to the old one goes nowhere, the answer to the new one comes back as id 0.
        revived.send(ask(0)).await.unwrap();
        let second = next_json(&mut standalone).await["id"].clone();
        assert_ne!(second, first);
        session.accept(client(json!({"jsonrpc": "2.0", "id": first, "result": {}}))).await.unwrap();
        session.accept(client(json!({"jsonrpc": "2.0", "id": second, "result": {}}))).await.unwrap();
        match revived.receive().await {
            Some(ClientJsonRpcMessage::Response(response)) => assert_eq!(response.id, RequestId::Number(0)),
            other => panic!("the answer to its request: {other:?}"),
        }
        assert!(revived.from_client.try_recv().is_err(), "nothing else");
    }
}
