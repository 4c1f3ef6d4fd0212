//! Which of a session's SSE streams a server message travels on.
//!
//! MCP 2025-11-25 basic/transports §Sending Messages to the Server: a request's POST stream
//! carries its answer and the messages that relate to it — its progress notifications, a
//! cancellation of it, and requests the server makes while handling it (marked with rmcp's
//! [`OriginatingRequestId`], SEP-2260) — and the answer ends that stream. Everything else goes
//! on the standalone (GET) stream (§Listening for Messages from the Server). The same rules as
//! rmcp's own session worker (`session/local.rs`, `resolve_outbound_channel`), and one more: a
//! notification the handler marked with the request it was handling (log messages, see
//! [`crate::mcp::logging::logging_notification`]) goes on that request's stream too, as the
//! TypeScript SDK's related notifications do, so a client that has not opened its GET stream
//! yet does not lose it.

use std::collections::HashMap;

use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, GetExtensions, JsonRpcRequest, ProgressToken, RequestId,
    ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::OriginatingRequestId;

/// A request stream of one session, numbered in the order they opened.
pub type StreamNo = u64;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Request(RequestId),
    Progress(ProgressToken),
}

/// Where a server message goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// On this request's stream; `last` when it is the answer, which ends the stream.
    Request { stream: StreamNo, last: bool },
    /// On the standalone stream.
    Standalone,
}

/// The open requests of one session and the streams they answer on.
#[derive(Debug, Default)]
pub struct Routes {
    next: StreamNo,
    keys: HashMap<Key, StreamNo>,
}

impl Routes {
    /// A request arrives on a new stream: its answer, its progress and what the server asks
    /// while handling it go there.
    pub fn open(&mut self, request: &JsonRpcRequest<ClientRequest>) -> StreamNo {
        use rmcp::model::GetMeta;
        let stream = self.next;
        self.next = self.next.wrapping_add(1);
        self.keys.insert(Key::Request(request.id.clone()), stream);
        if let Some(token) = request.request.get_meta().get_progress_token() {
            self.keys.insert(Key::Progress(token), stream);
        }
        stream
    }

    pub fn route(&self, message: &ServerJsonRpcMessage) -> Route {
        let (key, last) = match message {
            ServerJsonRpcMessage::Request(request) => {
                match request.request.extensions().get::<OriginatingRequestId>() {
                    Some(OriginatingRequestId(origin)) => (Key::Request(origin.clone()), false),
                    None => return Route::Standalone,
                }
            }
            ServerJsonRpcMessage::Notification(note) => match &note.notification {
                ServerNotification::ProgressNotification(progress) => {
                    (Key::Progress(progress.params.progress_token.clone()), false)
                }
                ServerNotification::CancelledNotification(cancelled) => match &cancelled.params.request_id {
                    Some(id) => (Key::Request(id.clone()), false),
                    None => return Route::Standalone,
                },
                other => match other.extensions().get::<OriginatingRequestId>() {
                    Some(OriginatingRequestId(origin)) => (Key::Request(origin.clone()), false),
                    None => return Route::Standalone,
                },
            },
            ServerJsonRpcMessage::Response(response) => (Key::Request(response.id.clone()), true),
            ServerJsonRpcMessage::Error(error) => match &error.id {
                Some(id) => (Key::Request(id.clone()), true),
                None => return Route::Standalone,
            },
        };
        match self.keys.get(&key) {
            Some(&stream) => Route::Request { stream, last },
            // The request is answered or was cancelled already.
            None => Route::Standalone,
        }
    }

    /// The client cancelled one of its requests (`notifications/cancelled`): the stream it
    /// names, which ends now.
    pub fn cancelled(&self, message: &ClientJsonRpcMessage) -> Option<StreamNo> {
        let ClientJsonRpcMessage::Notification(note) = message else { return None };
        let ClientNotification::CancelledNotification(cancelled) = &note.notification else { return None };
        let id = cancelled.params.request_id.clone()?;
        self.keys.get(&Key::Request(id)).copied()
    }

    /// The stream ended: nothing routes to it any more.
    pub fn close(&mut self, stream: StreamNo) {
        self.keys.retain(|_, s| *s != stream);
    }

    /// Whether no request is open.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Requests still open (for tests).
    pub fn open_streams(&self) -> usize {
        let mut streams: Vec<StreamNo> = self.keys.values().copied().collect();
        streams.sort_unstable();
        streams.dedup();
        streams.len()
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        CancelledNotification, CancelledNotificationParam, ClientJsonRpcMessage, ErrorData, NumberOrString,
        ProgressNotification, ProgressNotificationParam, ServerRequest, ServerResult,
    };
    use serde_json::json;

    use super::*;

    fn request(id: i64, progress: Option<&str>) -> JsonRpcRequest<ClientRequest> {
        let mut params = json!({"name": "list_connections"});
        if let Some(token) = progress {
            params["_meta"] = json!({"progressToken": token});
        }
        let message: ClientJsonRpcMessage =
            serde_json::from_value(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
                .unwrap();
        match message {
            ClientJsonRpcMessage::Request(request) => request,
            other => panic!("a request: {other:?}"),
        }
    }

    fn answer(id: i64) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::response(ServerResult::empty(()), RequestId::Number(id))
    }

    fn progress(token: &str) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::notification(ServerNotification::ProgressNotification(ProgressNotification::new(
            ProgressNotificationParam::new(ProgressToken(NumberOrString::String(token.into())), 0.5),
        )))
    }

    fn server_request(origin: Option<i64>) -> ServerJsonRpcMessage {
        let mut request = ServerRequest::PingRequest(Default::default());
        if let Some(origin) = origin {
            request.extensions_mut().insert(OriginatingRequestId(RequestId::Number(origin)));
        }
        ServerJsonRpcMessage::request(request, RequestId::Number(1000))
    }

    #[test]
    fn an_answer_and_the_requests_progress_go_on_its_stream_and_the_answer_is_last() {
        let mut routes = Routes::default();
        let first = routes.open(&request(1, Some("p1")));
        let second = routes.open(&request(2, None));
        assert_ne!(first, second);

        assert_eq!(routes.route(&progress("p1")), Route::Request { stream: first, last: false });
        assert_eq!(routes.route(&answer(2)), Route::Request { stream: second, last: true });
        let error = ServerJsonRpcMessage::error(ErrorData::internal_error("x", None), Some(RequestId::Number(1)));
        assert_eq!(routes.route(&error), Route::Request { stream: first, last: true });
    }

    #[test]
    fn what_the_server_asks_while_handling_a_request_goes_on_that_requests_stream() {
        let mut routes = Routes::default();
        let stream = routes.open(&request(7, None));
        assert_eq!(routes.route(&server_request(Some(7))), Route::Request { stream, last: false });
        assert_eq!(routes.route(&server_request(None)), Route::Standalone, "not tied to a request");
        assert_eq!(routes.route(&server_request(Some(8))), Route::Standalone, "its request is gone");
    }

    #[test]
    #[allow(deprecated, reason = "logging is deprecated by SEP-2577 but part of 2025-11-25")]
    fn a_notification_marked_with_the_request_being_handled_goes_on_that_requests_stream() {
        let mut routes = Routes::default();
        let stream = routes.open(&request(5, None));
        let log = |origin: i64| {
            let param = rmcp::model::LoggingMessageNotificationParam::new(rmcp::model::LoggingLevel::Info, json!("x"));
            ServerJsonRpcMessage::notification(crate::mcp::logging::logging_notification(
                param,
                &RequestId::Number(origin),
            ))
        };
        assert_eq!(routes.route(&log(5)), Route::Request { stream, last: false });
        assert_eq!(routes.route(&log(6)), Route::Standalone, "not a request of this session");
        routes.close(stream);
        assert_eq!(routes.route(&log(5)), Route::Standalone, "answered already: the GET stream");
        let unmarked = ServerJsonRpcMessage::notification(ServerNotification::LoggingMessageNotification(
            rmcp::model::LoggingMessageNotification::new(rmcp::model::LoggingMessageNotificationParam::new(
                rmcp::model::LoggingLevel::Info,
                json!("y"),
            )),
        ));
        assert_eq!(routes.route(&unmarked), Route::Standalone);
    }

    #[test]
    fn other_notifications_and_answers_to_closed_requests_go_on_the_standalone_stream() {
        let mut routes = Routes::default();
        let stream = routes.open(&request(1, Some("p1")));
        let changed =
            ServerJsonRpcMessage::notification(ServerNotification::PromptListChangedNotification(Default::default()));
        assert_eq!(routes.route(&changed), Route::Standalone);
        routes.close(stream);
        assert_eq!(routes.route(&answer(1)), Route::Standalone);
        assert_eq!(routes.route(&progress("p1")), Route::Standalone);
        assert_eq!(routes.open_streams(), 0);
    }

    #[test]
    fn a_client_cancellation_names_the_stream_of_the_request_it_cancels() {
        let mut routes = Routes::default();
        let stream = routes.open(&request(3, None));
        let cancel = |id: i64| {
            ClientJsonRpcMessage::notification(ClientNotification::CancelledNotification(CancelledNotification::new(
                CancelledNotificationParam::new(Some(RequestId::Number(id)), None),
            )))
        };
        assert_eq!(routes.cancelled(&cancel(3)), Some(stream));
        assert_eq!(routes.cancelled(&cancel(4)), None);
    }
}
