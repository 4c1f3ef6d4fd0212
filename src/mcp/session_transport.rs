//! One MCP session's transport, without a task of its own (issue 11).
//!
//! rmcp's `LocalSessionManager` puts a worker task between the HTTP service and each session's
//! handler, talking to both over channels of unboxed messages; a tokio channel allocates its
//! first block of 32 slots when it opens, and with messages of a few hundred bytes that was
//! most of the ~75 KB an idle session cost. Here there is no worker: what the handler sends is
//! routed in the handler's own task as it is sent ([`Routes`]), logged for resumption
//! ([`EventLog`]) and pushed onto the SSE stream it belongs to. The only channels are one for
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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};
use tokio::sync::{mpsc, oneshot};

use super::event_log::{EventLog, KEPT_PER_STREAM};
use super::session_routes::{Route, Routes, StreamNo};

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

/// A session: shared by the session manager (HTTP side) and its [`SessionTransport`].
pub struct Session {
    id: SessionId,
    log: Arc<EventLog>,
    inner: Mutex<Inner>,
}

struct Inner {
    /// `None` once the session is closed: the handler then reads the end of its input.
    to_handler: Option<mpsc::Sender<Box<ClientJsonRpcMessage>>>,
    /// The `initialize` request waiting for its answer, which goes back to the HTTP service.
    initialize: Option<(RequestId, oneshot::Sender<ServerJsonRpcMessage>)>,
    routes: Routes,
    requests: HashMap<StreamNo, Outlet>,
    standalone: Option<Outlet>,
    shadows: Vec<mpsc::Sender<Box<ServerSseMessage>>>,
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

impl Session {
    /// A new session and the transport its handler runs on.
    pub fn open(id: SessionId, log: Arc<EventLog>) -> (Arc<Self>, SessionTransport) {
        let (to_handler, from_client) = mpsc::channel(TO_HANDLER);
        let inner = Inner {
            to_handler: Some(to_handler),
            initialize: None,
            routes: Routes::default(),
            requests: HashMap::new(),
            standalone: None,
            shadows: Vec::new(),
        };
        let session = Arc::new(Self { id, log, inner: Mutex::new(inner) });
        (session.clone(), SessionTransport { session, from_client })
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn to_handler(inner: &Inner) -> Result<mpsc::Sender<Box<ClientJsonRpcMessage>>, SessionError> {
        inner.to_handler.clone().ok_or(SessionError::Closed)
    }

    /// Hands the `initialize` request to the handler and returns its answer.
    pub async fn initialize(&self, message: ClientJsonRpcMessage) -> Result<ServerJsonRpcMessage, SessionError> {
        let (answer, answered) = oneshot::channel();
        let to_handler = {
            let mut inner = self.inner();
            if let ClientJsonRpcMessage::Request(request) = &message {
                inner.initialize = Some((request.id.clone(), answer));
            }
            Self::to_handler(&inner)?
        };
        to_handler.send(Box::new(message)).await.map_err(|_| SessionError::Closed)?;
        answered.await.map_err(|_| SessionError::Closed)
    }

    /// A client request on a new stream, which starts with a priming event (SEP-1699) and
    /// ends with the request's answer.
    pub async fn request(&self, message: ClientJsonRpcMessage) -> Result<Events, SessionError> {
        let ClientJsonRpcMessage::Request(request) = &message else {
            // rmcp's HTTP service sends only requests here; anything else has no answer.
            self.accept(message).await?;
            return Ok(mpsc::channel(1).1);
        };
        let (stream, events, to_handler) = {
            let mut inner = self.inner();
            let to_handler = Self::to_handler(&inner)?;
            let stream = inner.routes.open(request);
            let (mut outlet, events) = Outlet::open(format!("{}/{stream}", self.id));
            let priming = self.logged(&outlet.log_id, ServerSseMessage::retry(REQUEST_STREAM_RETRY));
            outlet.push(priming);
            inner.requests.insert(stream, outlet);
            (stream, events, to_handler)
        };
        if to_handler.send(Box::new(message)).await.is_err() {
            self.end_request(stream);
            return Err(SessionError::Closed);
        }
        Ok(events)
    }

    /// A client notification, or its answer to a request of ours, for the handler.
    pub async fn accept(&self, message: ClientJsonRpcMessage) -> Result<(), SessionError> {
        let to_handler = {
            let mut inner = self.inner();
            // A cancelled request's stream ends now (its answer, if any, is not awaited).
            if let Some(stream) = inner.routes.cancelled(&message) {
                inner.end_request(stream);
            }
            Self::to_handler(&inner)?
        };
        to_handler.send(Box::new(message)).await.map_err(|_| SessionError::Closed)
    }

    /// The standalone stream (GET without `Last-Event-ID`): it receives what relates to no
    /// request, unless another one still listens (then it only keeps its connection).
    pub fn standalone(&self) -> Result<Events, SessionError> {
        let mut inner = self.inner();
        Self::to_handler(&inner)?;
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

    /// Sends what the handler sent on the stream it belongs to.
    fn deliver(&self, message: ServerJsonRpcMessage) -> Result<(), SessionError> {
        let mut inner = self.inner();
        let inner = &mut *inner;
        if inner.to_handler.is_none() {
            return Err(SessionError::Closed);
        }
        if let Some((id, _)) = &inner.initialize
            && answers(&message, id)
            && let Some((_, answer)) = inner.initialize.take()
        {
            return answer.send(message).map_err(|_| SessionError::Closed);
        }
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
        Ok(())
    }

    /// The event with the id the log gave it.
    fn logged(&self, log_id: &str, mut event: ServerSseMessage) -> ServerSseMessage {
        let id = self.log.append(&self.id, log_id, &event);
        event.event_id = Some(id.to_string());
        event
    }

    fn end_request(&self, stream: StreamNo) {
        self.inner().end_request(stream);
    }

    /// Ends every stream, and the handler's input; later sends fail.
    pub fn close(&self) {
        let mut inner = self.inner();
        inner.to_handler = None;
        inner.initialize = None;
        inner.routes = Routes::default();
        inner.requests.clear();
        inner.standalone = None;
        inner.shadows.clear();
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

/// The SSE events of a stream as a `Stream`.
pub fn events(mut events: Events) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
    futures::stream::poll_fn(move |cx| events.poll_recv(cx).map(|event| event.map(|e| *e)))
}

/// What rmcp's service loop reads from and writes to for one session.
pub struct SessionTransport {
    session: Arc<Session>,
    from_client: mpsc::Receiver<Box<ClientJsonRpcMessage>>,
}

impl Transport<RoleServer> for SessionTransport {
    type Error = SessionError;

    // Routed here, as the service loop hands it over, so messages keep the order it sent them in.
    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        std::future::ready(self.session.deliver(item))
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        self.from_client.recv().await.map(|message| *message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.session.close();
        std::future::ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use rmcp::model::{ClientNotification, ErrorData, ServerNotification, ServerRequest, ServerResult};
    use rmcp::service::OriginatingRequestId;
    use serde_json::json;

    use super::*;
    use crate::clock::ManualClock;

    fn open() -> (Arc<Session>, SessionTransport, Arc<EventLog>) {
        let log = Arc::new(EventLog::new(Arc::new(ManualClock::new(1_000))));
        let (session, transport) = Session::open("s1".into(), log.clone());
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
        let (session, mut transport, _) = open();
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

    #[tokio::test]
    async fn a_second_standalone_stream_only_keeps_its_connection_while_the_first_listens() {
        let (session, mut transport, _) = open();
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
        let (session, mut transport, _) = open();
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
        let (session, mut transport, _) = open();
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
}
