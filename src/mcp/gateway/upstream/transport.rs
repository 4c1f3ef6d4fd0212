//! The HTTP client of one upstream connection: rmcp's reqwest client, with the connection's
//! credential put on every request (POST, the standalone GET stream, DELETE) as it is *now*.
//!
//! rmcp's transport config holds one `auth_header` for the life of the connection; a user's
//! provider token changes (refresh, a new consent) while the connection lives. So the
//! credential lives in a [`CredentialCell`] that the call path sets just before each call
//! (`crate::mcp::gateway::forward::attempt`), and this client reads it for each request: a
//! refreshed token is used at once, without reconnecting. The cell belongs to one (user,
//! server) connection and is never shared (`super::pool`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;
use tokio::sync::watch;

use super::credential::CredentialCell;

/// How a broken SSE stream of the server's is resumed: twice, a quarter second apart, then the
/// connection counts as broken and the call waiting on it answers "not answering" at once.
/// rmcp's default backs off without end, so a server that went away mid-call held the call
/// until its timeout.
#[derive(Debug)]
pub struct FewRetries;

/// Resumptions tried before a broken stream is given up.
const RESUMPTIONS: usize = 2;

impl rmcp::transport::common::client_side_sse::SseRetryPolicy for FewRetries {
    fn retry(&self, current_times: usize) -> Option<std::time::Duration> {
        (current_times < RESUMPTIONS).then_some(std::time::Duration::from_millis(250))
    }
}

/// The server's log messages (`notifications/message`) counted twice: as they come off the
/// wire, and as [`super::client`] has passed them on. rmcp hands each notification to the
/// handler on a task of its own while it hands an answer to its request at once, so a message
/// the server sent just before the answer may not have reached the client yet when the broker
/// answers — and a 2026-07-28 request's stream ends with its answer. A forwarded request waits
/// until both counts meet ([`LogTally::settled`]) before it answers.
#[derive(Default)]
pub struct LogTally {
    seen: AtomicU64,
    handled: watch::Sender<u64>,
}

impl LogTally {
    fn saw(&self) {
        self.seen.fetch_add(1, Ordering::SeqCst);
    }

    /// One message passed on (or dropped) by the handler.
    pub fn handled(&self) {
        self.handled.send_modify(|handled| *handled += 1);
    }

    /// Waits, at most `limit`, until every message seen so far has been handled. At the limit
    /// the messages still missing are written off: one rmcp never handed over (it could not
    /// read it) costs one wait, not one on every later answer.
    pub async fn settled(&self, limit: std::time::Duration) {
        let seen = self.seen.load(Ordering::SeqCst);
        if *self.handled.borrow() >= seen {
            return;
        }
        let mut handled = self.handled.subscribe();
        if tokio::time::timeout(limit, handled.wait_for(|handled| *handled >= seen)).await.is_err() {
            self.handled.send_modify(|handled| *handled = (*handled).max(seen));
        }
    }

    /// `stream` with its log messages counted as they pass.
    fn counting(
        self: &Arc<Self>,
        stream: BoxStream<'static, Result<Sse, SseError>>,
    ) -> BoxStream<'static, Result<Sse, SseError>> {
        let tally = self.clone();
        stream
            .inspect(move |event| {
                if let Ok(event) = event
                    && event.data.as_deref().is_some_and(is_log_message)
                {
                    tally.saw();
                }
            })
            .boxed()
    }
}

/// Whether an SSE event's data is a `notifications/message` (parsed only when it names the method).
fn is_log_message(data: &str) -> bool {
    const METHOD: &str = "notifications/message";
    data.contains(METHOD)
        && serde_json::from_str::<serde_json::Value>(data).is_ok_and(|message| {
            message.get("method").and_then(|m| m.as_str()) == Some(METHOD) && message.get("id").is_none()
        })
}

/// rmcp's reqwest client with the cell's credential on every request, counting the server's
/// log messages on every stream it opens.
#[derive(Clone)]
pub struct CredentialedClient {
    inner: reqwest::Client,
    cell: Arc<CredentialCell>,
    logs: Arc<LogTally>,
}

impl CredentialedClient {
    pub fn new(inner: reqwest::Client, cell: Arc<CredentialCell>, logs: Arc<LogTally>) -> Self {
        Self { inner, cell, logs }
    }

    fn counted(&self, response: StreamableHttpPostResponse) -> StreamableHttpPostResponse {
        match response {
            StreamableHttpPostResponse::Sse(stream, session) => {
                StreamableHttpPostResponse::Sse(self.logs.counting(stream), session)
            }
            other => other,
        }
    }
}

impl StreamableHttpClient for CredentialedClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = self.cell.apply(custom_headers);
        self.inner.post_message(uri, message, session_id, None, headers).await.map(|r| self.counted(r))
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = self.cell.apply(custom_headers);
        self.inner
            .post_message_with_max_sse_event_size(uri, message, session_id, None, headers, max_sse_event_size)
            .await
            .map(|r| self.counted(r))
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = self.cell.apply(custom_headers);
        self.inner
            .post_message_with_response_limits(uri, message, session_id, None, headers, limits)
            .await
            .map(|r| self.counted(r))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let headers = self.cell.apply(custom_headers);
        self.inner.delete_session(uri, session_id, None, headers).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let headers = self.cell.apply(custom_headers);
        self.inner.get_stream(uri, session_id, last_event_id, None, headers).await.map(|s| self.logs.counting(s))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let headers = self.cell.apply(custom_headers);
        self.inner
            .get_stream_with_max_sse_event_size(uri, session_id, last_event_id, None, headers, max_sse_event_size)
            .await
            .map(|stream| self.logs.counting(stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_log_notification_is_counted_as_one() {
        assert!(is_log_message(
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#
        ));
        assert!(!is_log_message(
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"message":"notifications/message"}}"#
        ));
        assert!(!is_log_message(r#"{"jsonrpc":"2.0","id":1,"result":{"text":"notifications/message"}}"#));
        assert!(!is_log_message("notifications/message, not JSON"));
    }

    #[tokio::test]
    async fn an_answer_waits_for_the_log_messages_seen_before_it_and_not_for_longer_than_its_limit() {
        let tally = Arc::new(LogTally::default());
        tally.settled(std::time::Duration::from_secs(60)).await;
        tally.saw();
        tally.saw();
        let waiting = tokio::spawn({
            let tally = tally.clone();
            async move { tally.settled(std::time::Duration::from_secs(60)).await }
        });
        tally.handled();
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "one of two handled");
        tally.handled();
        waiting.await.unwrap();
        // A message never handled holds an answer back only until the limit, and only once.
        tally.saw();
        tally.settled(std::time::Duration::from_millis(20)).await;
        assert_eq!(*tally.handled.borrow(), tally.seen.load(Ordering::SeqCst), "written off");
    }
}
