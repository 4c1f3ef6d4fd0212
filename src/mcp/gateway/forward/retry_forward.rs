//! A 2026-07-28 client's retry that reaches an instance other than the one its flight waits on
//! is passed on there ([`super::flight_home`] says why and how the home is
//! named).
//!
//! This runs on `/mcp` after the bearer check and the JSON-RPC framing check (which reads the
//! home tag of `params.requestState`, [`FlightHomeTag`]), before rmcp. A request whose tag opens
//! (for this user, while the flight can wait) to another instance is sent there — method, path,
//! the end-to-end headers (the user's bearer token among them, which that instance checks
//! again), `Host` set to the public URL's, and the body — with [`FORWARDED`] set; that
//! instance's answer, a stream or not, is passed back as it comes, with the headers an MCP
//! answer has ([`answer_headers`]). The instance that holds the flight treats it as a retry that
//! reached it directly.
//!
//! Never a loop, never a hang, never elsewhere, never twice:
//! - a request carrying [`FORWARDED`] is never passed on again (a client that sets it only keeps
//!   its own request here);
//! - an instance that does not accept the connection within [`CONNECT_WAIT`](crate::mcp::gateway::state::CONNECT_WAIT) (gone) leaves the
//!   request to this one, which answers that the question expired and to send it again;
//! - a failure after the request was sent (the holding instance died mid-answer, or took past
//!   its call timeout and a margin) may come after the answer was used there: the request is not
//!   handled again here (a second run of the tool), the client gets a JSON-RPC `-32603` saying
//!   the outcome is unknown;
//! - the address comes only from a tag the broker sealed for this user: a client cannot make
//!   the broker send its request anywhere else.
//!
//! What does not cross: the client's address (the holding instance sees this one's; its
//! per-user limits do not depend on it); the query string (`/mcp` takes none).

use std::sync::Arc;

use axum::Json;
use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::flight_home::{self, Home};
use crate::identity::AuthenticatedUser;
use crate::mcp::gateway::state::Gateway;
use crate::mcp::transport::jsonrpc_guard::{FlightHomeTag, MAX_MESSAGE_BYTES};
use crate::state::AppState;

/// Marks a request one instance passed on to another.
pub const FORWARDED: HeaderName = HeaderName::from_static("oauth-broker-forwarded");

/// What the middleware needs: the app (sealer, clock, public URL), and this instance's gateway.
#[derive(Clone)]
pub struct RetryForward {
    pub app: AppState,
    pub gateway: Arc<Gateway>,
}

/// The `/mcp` middleware.
pub async fn forward_retries_to_their_flight(
    State(forward): State<RetryForward>,
    request: Request,
    next: Next,
) -> Response {
    let Some(FlightHomeTag(tag)) = request.extensions().get::<FlightHomeTag>() else {
        return next.run(request).await;
    };
    let Some(user) = request.extensions().get::<AuthenticatedUser>() else { return next.run(request).await };
    if request.headers().contains_key(FORWARDED) {
        return next.run(request).await;
    }
    // A tag that does not open (altered, another user's, expired) names no home: the request is
    // handled here, where its flight is not.
    let Some(home) = flight_home::open(&forward.app.core.sealer, tag, &user.user_id, forward.app.core.now()) else {
        return next.run(request).await;
    };
    if forward.gateway.home.is_here(&home) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    // Already read whole by the framing check: this takes it back without copying.
    let Ok(bytes) = to_bytes(body, MAX_MESSAGE_BYTES).await else {
        return next.run(Request::from_parts(parts, Body::empty())).await;
    };
    let public = &forward.app.core.config.public_url;
    let host = public.host_str().map(|host| match public.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    });
    match pass_on(&forward.gateway, &home, &parts, host.as_deref(), bytes.clone()).await {
        Ok(response) => {
            crate::telemetry::gateway_retry_passed_on("answered");
            response
        }
        Err(error) if error.is_connect() => {
            crate::telemetry::gateway_retry_passed_on("home_unreachable");
            tracing::warn!(
                error = %crate::error_chain::Chain(&error),
                "the instance holding a server's question did not accept the connection; the retry is answered here"
            );
            next.run(Request::from_parts(parts, Body::from(bytes))).await
        }
        Err(error) => {
            tracing::warn!(
                error = %crate::error_chain::Chain(&error),
                "the instance holding a server's question did not answer a retry passed on to it"
            );
            crate::telemetry::gateway_retry_passed_on("outcome_unknown");
            outcome_unknown(&bytes)
        }
    }
}

/// Sends the request to `home` and turns its answer into this request's response.
async fn pass_on(
    gateway: &Gateway,
    home: &Home,
    parts: &axum::http::request::Parts,
    host: Option<&str>,
    body: Bytes,
) -> Result<Response, reqwest::Error> {
    let mut url = home.url.clone();
    url.set_path(&format!("{}{}", home.url.path().trim_end_matches('/'), parts.uri.path()));
    url.set_query(None);
    let mut headers = end_to_end(&parts.headers);
    headers.remove(header::HOST);
    if let Some(host) = host.and_then(|host| HeaderValue::from_str(host).ok()) {
        // The host the holding instance serves /mcp for (it checks `Host` as this one did).
        headers.insert(header::HOST, host);
    }
    headers.insert(FORWARDED, HeaderValue::from_static("1"));
    let answer = gateway.forwarding.request(parts.method.clone(), url).headers(headers).body(body).send().await?;
    let mut response = Response::builder().status(answer.status());
    if let Some(headers) = response.headers_mut() {
        *headers = answer_headers(answer.headers());
    }
    let body = Body::from_stream(answer.bytes_stream());
    Ok(response.body(body).unwrap_or_else(|_| Response::new(Body::empty())))
}

/// The answer when the holding instance failed after the request reached it: a JSON-RPC error
/// for the request's id. It may have used the answer already, so the client is not told to send
/// it again as if nothing happened.
fn outcome_unknown(body: &[u8]) -> Response {
    let id = serde_json::from_slice::<Value>(body).ok().and_then(|message| message.get("id").cloned());
    let error = json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": {
            "code": -32603,
            "message": "the broker instance this request's question waited on did not finish answering; \
                        whether the server got the answer is unknown",
        },
    });
    // HTTP 200: a JSON-RPC answer to the request, which the client reads as such (an HTTP error
    // status would read as the transport failing).
    (StatusCode::OK, Json(error)).into_response()
}

/// Of the holding instance's answer, the headers an MCP answer carries: its type and caching,
/// MCP's own, an authentication challenge, a retry hint, the request id. Nothing else (a
/// cookie, say) is served under this origin.
fn answer_headers(headers: &HeaderMap) -> HeaderMap {
    let mut kept = HeaderMap::new();
    for (name, value) in headers {
        let text = name.as_str();
        let wanted =
            matches!(text, "content-type" | "cache-control" | "www-authenticate" | "retry-after" | "x-request-id")
                || text.starts_with("mcp-");
        if wanted {
            kept.append(name.clone(), value.clone());
        }
    }
    kept
}

/// `headers` without the hop-by-hop ones (RFC 9110 §7.6.1), `Expect`, and the length, which the
/// next hop sets for itself.
fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    let named_in_connection: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(',').map(|name| name.trim().to_ascii_lowercase()))
        .collect();
    let mut kept = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let hop_by_hop = matches!(
            name.as_str(),
            "connection"
                | "keep-alive"
                | "proxy-connection"
                | "proxy-authenticate"
                | "proxy-authorization"
                | "te"
                | "trailer"
                | "transfer-encoding"
                | "upgrade"
                | "expect"
                | "content-length"
        ) || named_in_connection.iter().any(|named| named == name.as_str());
        if !hop_by_hop {
            kept.append(name.clone(), value.clone());
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_stay_behind_and_the_rest_cross() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("host", "broker.example"),
            ("authorization", "Bearer t"),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"),
            ("connection", "keep-alive, x-private"),
            ("x-private", "1"),
            ("transfer-encoding", "chunked"),
            ("content-length", "12"),
            ("upgrade", "h2c"),
        ] {
            headers.append(HeaderName::from_static(name), value.parse().unwrap());
        }
        headers.append(header::EXPECT, "100-continue".parse().unwrap());
        let kept = end_to_end(&headers);
        let names: Vec<&str> = kept.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["host", "authorization", "content-type", "accept", "mcp-protocol-version"]);
    }

    #[test]
    fn of_the_answer_only_what_an_mcp_answer_carries_comes_back() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache"),
            ("mcp-session-id", "s"),
            ("x-request-id", "r"),
            ("set-cookie", "a=b"),
            ("strict-transport-security", "max-age=1"),
            ("connection", "close"),
        ] {
            headers.append(HeaderName::from_static(name), value.parse().unwrap());
        }
        let kept = answer_headers(&headers);
        let names: Vec<&str> = kept.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["content-type", "cache-control", "mcp-session-id", "x-request-id"]);
    }

    #[tokio::test]
    async fn an_unknown_outcome_answers_the_requests_own_id_and_says_not_to_assume_nothing_happened() {
        let response = outcome_unknown(br#"{"jsonrpc": "2.0", "id": 41, "method": "tools/call"}"#);
        assert_eq!(response.status(), StatusCode::OK);
        let body = to_bytes(response.into_body(), 4096).await.unwrap();
        let answer: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(answer["id"], 41);
        assert_eq!(answer["error"]["code"], -32603);
        assert!(answer["error"]["message"].as_str().unwrap().contains("unknown"), "{answer}");
    }
}
