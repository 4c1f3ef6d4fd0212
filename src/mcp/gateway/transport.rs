//! The HTTP client of one upstream connection: rmcp's reqwest client, with the connection's
//! credential put on every request (POST, the standalone GET stream, DELETE) as it is *now*.
//!
//! rmcp's transport config holds one `auth_header` for the life of the connection; a user's
//! provider token changes (refresh, a new consent) while the connection lives. So the
//! credential lives in a [`CredentialCell`] that the call path sets just before each call
//! (`super::call`), and this client reads it for each request: a refreshed token is used at
//! once, without reconnecting. The cell belongs to one (user, server) connection and is never
//! shared (`super::pool`).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;

/// A credential as it goes on the wire: one header, its value marked sensitive (kept out of
/// `http`'s `Debug` output).
#[derive(Clone)]
pub struct Credential {
    pub header: HeaderName,
    pub value: HeaderValue,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential({}: [redacted])", self.header)
    }
}

impl Credential {
    /// `header: value`; `None` if either cannot be sent (checked at registration already).
    pub fn new(header: &str, value: &str) -> Option<Self> {
        let header = HeaderName::from_bytes(header.as_bytes()).ok()?;
        let mut value = HeaderValue::from_str(value).ok()?;
        value.set_sensitive(true);
        Some(Self { header, value })
    }
}

/// The credential a connection's next request carries (`None`: no credential header).
#[derive(Debug, Default)]
pub struct CredentialCell(RwLock<Option<Credential>>);

impl CredentialCell {
    pub fn set(&self, credential: Option<Credential>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = credential;
    }

    fn current(&self) -> Option<Credential> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// `headers` with the current credential added (replacing one of the same name).
    fn apply(&self, mut headers: HashMap<HeaderName, HeaderValue>) -> HashMap<HeaderName, HeaderValue> {
        if let Some(credential) = self.current() {
            headers.insert(credential.header, credential.value);
        }
        headers
    }
}

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

/// rmcp's reqwest client with the cell's credential on every request.
#[derive(Clone)]
pub struct CredentialedClient {
    inner: reqwest::Client,
    cell: Arc<CredentialCell>,
}

impl CredentialedClient {
    pub fn new(inner: reqwest::Client, cell: Arc<CredentialCell>) -> Self {
        Self { inner, cell }
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
        self.inner.post_message(uri, message, session_id, None, headers).await
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
        self.inner.post_message_with_response_limits(uri, message, session_id, None, headers, limits).await
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
        self.inner.get_stream(uri, session_id, last_event_id, None, headers).await
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cell_puts_its_current_credential_on_each_request_and_hides_it_from_debug() {
        let cell = CredentialCell::default();
        assert!(cell.apply(HashMap::new()).is_empty());
        cell.set(Credential::new("Authorization", "Bearer one"));
        let authorization = HeaderName::from_static("authorization");
        let first = cell.apply(HashMap::new());
        assert_eq!(first.get(&authorization).unwrap(), "Bearer one");
        cell.set(Credential::new("Authorization", "Bearer two"));
        let second = cell.apply(first);
        assert_eq!((second.len(), second.get(&authorization).unwrap().as_bytes()), (1, &b"Bearer two"[..]), "replaced");
        let shown = format!("{:?}", Credential::new("X-Api-Key", "s3cret").unwrap());
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(Credential::new("X Bad", "v").is_none());
    }
}
