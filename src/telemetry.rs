//! Metrics: counters and histograms recorded through the `metrics` facade into one
//! process-wide Prometheus recorder (`metrics-exporter-prometheus`), rendered at `/metrics`.
//!
//! | metric | labels | recorded where |
//! |---|---|---|
//! | `oauth_broker_http_requests_total`, `oauth_broker_http_request_duration_seconds` | `method`, `route` (the route template, never a raw path), `status` | [`track_http`], every route |
//! | `oauth_broker_mcp_requests_total` | `method`, `tool` | [`mcp_message`], from the /mcp JSON-RPC guard |
//! | `oauth_broker_mcp_sessions_active` | – | [`session_opened`] / [`session_closed`] |
//! | `oauth_broker_mcp_sessions_parked` | – | [`session_parked`] / [`session_unparked`] |
//! | `oauth_broker_authorizations_total` | `outcome` | [`Audit::record`], every audit entry: completed, declined, failed, expired by an admin |
//! | `oauth_broker_refreshes_total` | `provider`, `outcome` | [`provider_call`] for `call = refresh` |
//! | `oauth_broker_upstream_requests_total`, `oauth_broker_upstream_duration_seconds` | `provider`, `call`, `result` | [`provider_call`], [`api_call`] |
//! | `oauth_broker_gateway_calls_total`, `oauth_broker_gateway_call_duration_seconds` | `server`, `outcome` | [`gateway_call`] |
//! | `oauth_broker_gateway_connections_open` | – | [`gateway_connection_opened`] / [`gateway_connection_closed`] |
//! | `oauth_broker_gateway_retries_passed_on_total` | `outcome` | [`gateway_retry_passed_on`] |
//! | `oauth_broker_token_api_answers_total` | `answer` | [`token_api_answer`] |
//! | `oauth_broker_audit_events_total` | `action`, `outcome` | [`Audit::record`], every audit entry |
//!
//! Label values come from closed sets (route templates, the broker's own action names and
//! tools, known MCP methods, configured provider ids), never from a user id, an account, a
//! token or free text a client sent: anything else is `other`. Recording is a lookup in the
//! recorder's map and an atomic add (on the per-request paths, a handle remembered by its labels
//! and an atomic add: [`handles`]); the recorder is process-wide ([`recorder`]), so several apps
//! in one process (tests) share it.
//!
//! [`Audit::record`]: crate::store::audit::Audit::record

#[cfg(test)]
pub(crate) mod captured;
mod handles;
mod recorder;

pub use recorder::{install, render};

use std::future::Future;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use secrecy::{ExposeSecret, SecretString};

/// Middleware on every route: counts the request under its route template and times it.
pub async fn track_http(request: Request, next: Next) -> Response {
    let started = Instant::now();
    // MatchedPath is an Arc'd string: cloning it allocates nothing.
    let route = request.extensions().get::<MatchedPath>().cloned();
    let method = method_label(request.method());
    let response = next.run(request).await;
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    handles::http_answered(method, route, response.status().as_u16(), started.elapsed().as_secs_f64());
    response
}

fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// MCP methods counted by name; any other is `other`.
const MCP_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
];

/// Counts one JSON-RPC message the /mcp guard let through: its method (`None`: a client's
/// answer to a server request, counted as `response`) and, for `tools/call`, its tool's label
/// (from the MCP face's closed set of tools; `None` counts as `other`). The guard has parsed
/// the body already and hands over what it read (one parse).
pub fn mcp_message(method: Option<&str>, tool: Option<&'static str>) {
    let (method, tool) = mcp_labels(method, tool);
    handles::mcp_counted(method, tool);
}

fn mcp_labels(method: Option<&str>, tool: Option<&'static str>) -> (&'static str, &'static str) {
    let Some(method) = method else { return ("response", "") };
    let method = MCP_METHODS.iter().find(|m| **m == method).copied().unwrap_or("other");
    let tool = if method == "tools/call" { tool.unwrap_or("other") } else { "" };
    (method, tool)
}

/// A value that names itself with a label from a closed set (how a call to a provider ended),
/// so the metrics never carry free text. Implemented where the value lives.
pub trait Label {
    fn label(&self) -> &'static str;
}

pub fn session_opened() {
    metrics::gauge!("oauth_broker_mcp_sessions_active").increment(1.0);
}

pub fn session_closed() {
    metrics::gauge!("oauth_broker_mcp_sessions_active").decrement(1.0);
}

/// A connection to a server behind the broker was opened.
pub fn gateway_connection_opened() {
    metrics::gauge!("oauth_broker_gateway_connections_open").increment(1.0);
}

/// A connection to a server behind the broker is gone (closed and let go by every holder).
pub fn gateway_connection_closed() {
    metrics::gauge!("oauth_broker_gateway_connections_open").decrement(1.0);
}

/// A session parked (its rmcp service stopped while idle).
pub fn session_parked() {
    metrics::gauge!("oauth_broker_mcp_sessions_parked").increment(1.0);
}

/// A parked session came back (a new service) or closed.
pub fn session_unparked() {
    metrics::gauge!("oauth_broker_mcp_sessions_parked").decrement(1.0);
}

/// Times an OAuth call to a provider (`call`: `token`, `refresh`, `revoke`, …) and counts how
/// it ended (`ok`, or the error's [`Label`]); a refresh is also counted in
/// `oauth_broker_refreshes_total`.
pub async fn provider_call<T, E: Label>(
    provider: &str,
    call: &'static str,
    request: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let started = Instant::now();
    let answer = request.await;
    let result = match &answer {
        Ok(_) => "ok",
        Err(error) => error.label(),
    };
    upstream(provider, call, result, started.elapsed());
    if call == "refresh" {
        let outcome = if result == "ok" { "success" } else { result };
        metrics::counter!("oauth_broker_refreshes_total", "provider" => provider.to_owned(), "outcome" => outcome)
            .increment(1);
    }
    answer
}

/// Times an API request the broker makes at a provider for a client or service and counts it
/// by the class of the provider's status (`2xx` … `5xx`), or `unreachable`.
pub async fn api_call<T, E>(
    provider: &str,
    request: impl Future<Output = Result<T, E>>,
    status_of: impl Fn(&T) -> u16,
) -> Result<T, E> {
    let started = Instant::now();
    let answer = request.await;
    let result = match &answer {
        Ok(response) => match status_of(response) {
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        },
        Err(_) => "unreachable",
    };
    upstream(provider, "api", result, started.elapsed());
    answer
}

fn upstream(provider: &str, call: &'static str, result: &'static str, took: Duration) {
    let provider = provider.to_owned();
    metrics::counter!("oauth_broker_upstream_requests_total", "provider" => provider.clone(), "call" => call, "result" => result)
        .increment(1);
    metrics::histogram!("oauth_broker_upstream_duration_seconds", "provider" => provider, "call" => call)
        .record(took.as_secs_f64());
}

/// Counts one token-API answer (`issued`, `not_connected`, `provider_unavailable`, …).
/// A tool call forwarded to a server behind the broker ended (`server` is the operator's name
/// for it; `outcome` one of a closed set).
pub fn gateway_call(server: &str, outcome: &'static str, seconds: f64) {
    metrics::counter!("oauth_broker_gateway_calls_total", "server" => server.to_owned(), "outcome" => outcome)
        .increment(1);
    metrics::histogram!("oauth_broker_gateway_call_duration_seconds", "server" => server.to_owned()).record(seconds);
}

/// A retry that reached this process was passed on to the instance whose call waits for it:
/// `answered` (that instance's answer went back), `home_unreachable` (it did not accept the
/// connection: answered here) or `outcome_unknown` (it failed once it had the request).
pub fn gateway_retry_passed_on(outcome: &'static str) {
    metrics::counter!("oauth_broker_gateway_retries_passed_on_total", "outcome" => outcome).increment(1);
}

pub fn token_api_answer(answer: &'static str) {
    metrics::counter!("oauth_broker_token_api_answers_total", "answer" => answer).increment(1);
}

/// Who may read `/metrics` on the main listener (from `metrics_listen` and `metrics_token`).
#[derive(Clone, Copy)]
pub enum MetricsAccess<'a> {
    /// `metrics_listen` is set: served there, never here.
    ElsewhereOnly,
    /// Neither is set: off on the main listener.
    Off,
    /// A request bearing this token.
    Token(&'a SecretString),
}

/// `GET /metrics` on the main listener. Who may read it: with `metrics_listen` set, nobody
/// here (it is served there, and this answers 404); else a request bearing `metrics_token`
/// (`Authorization: Bearer …`, compared in constant time; 401 otherwise); with neither set,
/// metrics are off on the main listener (404 saying how to turn them on). The counters hold
/// no user id or secret, but they do tell who uses the broker how much, so they are not public.
pub fn metrics_on_main_listener(access: MetricsAccess<'_>, headers: &HeaderMap) -> Response {
    let token = match access {
        MetricsAccess::ElsewhereOnly => {
            return plain(
                StatusCode::NOT_FOUND,
                "metrics are served on the metrics listener (metrics_listen), not here\n",
            );
        }
        MetricsAccess::Off => {
            return plain(
                StatusCode::NOT_FOUND,
                "metrics are off on this listener: set metrics_listen (a separate address) or metrics_token (a bearer token)\n",
            );
        }
        MetricsAccess::Token(token) => token,
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    let expected = token.expose_secret().as_bytes();
    if !bool::from(subtle::ConstantTimeEq::ct_eq(presented.as_bytes(), expected)) {
        let mut response = plain(StatusCode::UNAUTHORIZED, "metrics need the metrics token as a bearer token\n");
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"metrics\""));
        return response;
    }
    exposition()
}

/// The router of the separate metrics listener (`metrics_listen`): `/metrics`, unauthenticated
/// (bind it where only the scraper reaches).
pub fn metrics_listener_router() -> axum::Router {
    axum::Router::new().route("/metrics", axum::routing::get(|| async { exposition() }))
}

fn exposition() -> Response {
    match render() {
        Some(text) => {
            let mut response = (StatusCode::OK, text).into_response();
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        None => plain(StatusCode::SERVICE_UNAVAILABLE, "metrics are unavailable: another recorder is installed\n"),
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    let mut response = (status, text).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The request-id header: taken from the request when well formed, else made.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The id of the HTTP request being handled (a request extension).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(pub String);

/// Whether a client's `X-Request-Id` is used as is: 1 to 128 of `A-Z a-z 0-9 - _ . :`. Anything
/// else (spaces, quotes, control characters that could forge a log line) is replaced.
pub fn well_formed_request_id(value: &str) -> bool {
    (1..=128).contains(&value.len())
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// Middleware (outermost but one): gives every request an id, puts it in the request (header
/// and [`RequestId`] extension, so spans and rmcp's tool calls see it) and echoes it in the
/// response.
pub async fn assign_request_id(mut request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| well_formed_request_id(v))
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
    let value = HeaderValue::from_str(&id).ok();
    if let Some(value) = &value {
        request.headers_mut().insert(REQUEST_ID_HEADER, value.clone());
    }
    request.extensions_mut().insert(RequestId(id));
    let mut response = next.run(request).await;
    if let Some(value) = value {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    response
}

/// The span of one HTTP request (tower-http `TraceLayer`): method, route template and request
/// id; never the URI, whose query can hold an OAuth code or state.
pub fn request_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", |p| p.as_str());
    let id = request.extensions().get::<RequestId>().map_or("", |id| id.0.as_str());
    tracing::info_span!("request", request_id = %id, method = %request.method(), route = %route)
}

/// [`trace_layer`]'s type.
pub type RequestTraceLayer = tower_http::trace::TraceLayer<
    tower_http::classify::SharedClassifier<tower_http::classify::ServerErrorsAsFailures>,
    fn(&axum::http::Request<axum::body::Body>) -> tracing::Span,
    tower_http::trace::DefaultOnRequest,
    LogResponse,
>;

/// The tower-http layer that opens [`request_span`] and logs each answer (status, latency).
pub fn trace_layer() -> RequestTraceLayer {
    tower_http::trace::TraceLayer::new_for_http()
        .make_span_with(request_span as fn(&axum::http::Request<axum::body::Body>) -> tracing::Span)
        .on_response(LogResponse)
}

/// One line per answer with typed fields: `status` and `latency_ms` are numbers, so a JSON log
/// reader can filter and add them up (tower-http's own line writes `"latency":"25 ms"`).
#[derive(Debug, Clone, Copy)]
pub struct LogResponse;

impl<B> tower_http::trace::OnResponse<B> for LogResponse {
    fn on_response(self, response: &axum::http::Response<B>, latency: std::time::Duration, _span: &tracing::Span) {
        tracing::info!(
            status = response.status().as_u16(),
            latency_ms = latency.as_secs_f64() * 1000.0,
            "finished processing request"
        );
    }
}

/// The span of one MCP tool call: the tool's label (the MCP face's closed set, as in the
/// metrics) and the id of the HTTP request that carried it.
pub fn tool_call_span(ctx: &rmcp::service::RequestContext<rmcp::RoleServer>, tool: &'static str) -> tracing::Span {
    let id = ctx
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<RequestId>())
        .map_or("", |id| id.0.as_str());
    tracing::info_span!("tool_call", request_id = %id, tool = %tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The labels of a message whose tool the MCP face labelled `tool` (`crate::mcp::tools::label`
    /// turns a client's tool name into one of its own or `other`; tested there).
    fn labels(body: &str, tool: Option<&'static str>) -> (&'static str, &'static str) {
        let message: serde_json::Value = serde_json::from_str(body).unwrap();
        mcp_labels(message["method"].as_str(), tool)
    }

    #[test]
    fn only_plain_request_ids_are_taken_from_a_client() {
        assert!(well_formed_request_id("3f1c9a2e-6b7d-4e0a-9c1f-2a5b7d9e0f13"));
        assert!(well_formed_request_id("trace.abc_123:4"));
        for bad in ["", "a b", "x\ninjected=1", "\"quoted\"", "ünï", &"a".repeat(129)] {
            assert!(!well_formed_request_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn mcp_labels_come_from_closed_sets_never_from_what_a_client_sent() {
        assert_eq!(
            labels(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"provider_request","arguments":{}}}"#,
                Some("provider_request")
            ),
            ("tools/call", "provider_request")
        );
        assert_eq!(
            labels(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"user-4711-secret"}}"#, None),
            ("tools/call", "other")
        );
        assert_eq!(labels(r#"{"jsonrpc":"2.0","id":1,"method":"x/alice@example.com"}"#, None), ("other", ""));
        assert_eq!(labels(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, Some("ping")), ("ping", ""));
        assert_eq!(labels(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, None), ("response", ""));
    }
}
