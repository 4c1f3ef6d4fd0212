//! A 2026-07-28 client's retry that reaches an instance other than the one its flight waits on
//! is passed on there (issue 26, item 6; [`super::flight_home`] says why and how the home is
//! named).
//!
//! This runs on `/mcp` after the bearer check and the JSON-RPC framing check (which reads the
//! home tag of `params.requestState`, [`FlightHomeTag`]), before rmcp. A request whose tag opens
//! to another instance is sent there as it came — method, path, headers (the public `Host`
//! among them, and the user's bearer token, which that instance checks again) and body — with
//! [`FORWARDED`] set, and that instance's answer, a stream or not, is passed back as it comes.
//! The instance that holds the flight treats it as a retry that reached it directly.
//!
//! Never a loop, never a hang, never elsewhere:
//! - a request carrying [`FORWARDED`] is never passed on again (a client that sets it only keeps
//!   its own request here);
//! - an instance that cannot be reached within [`CONNECT_WAIT`] (gone, restarted) leaves the
//!   request to this one, which answers that the question expired and to send it again; one
//!   that accepts and then never finishes is let go after its call timeout and a margin;
//! - the address comes only from a tag the broker sealed: a client cannot make the broker send
//!   its request anywhere else.
//!
//! What does not cross: the client's address (the holding instance sees this one's; its
//! per-user limits do not depend on it).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, header};
use axum::middleware::Next;
use axum::response::Response;

use super::Gateway;
use super::flight_home::{self, Home};
use crate::crypto::Sealer;
use crate::mcp::transport::jsonrpc_guard::{FlightHomeTag, MAX_MESSAGE_BYTES};

/// Marks a request one instance passed on to another.
pub const FORWARDED: HeaderName = HeaderName::from_static("oauth-broker-forwarded");

/// How long the holding instance has to accept the connection.
pub const CONNECT_WAIT: Duration = Duration::from_secs(2);

/// What the middleware needs: the sealer that opens homes, and this instance's gateway.
#[derive(Clone)]
pub struct RetryForward {
    pub sealer: Arc<Sealer>,
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
    if request.headers().contains_key(FORWARDED) {
        return next.run(request).await;
    }
    // A tag that does not open is no one's: the state it came with is handled (refused) here.
    let Some(home) = flight_home::open(&forward.sealer, tag) else { return next.run(request).await };
    if forward.gateway.home.is_here(&home) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    // Already read whole by the framing check: this takes it back without copying.
    let Ok(bytes) = to_bytes(body, MAX_MESSAGE_BYTES).await else {
        return next.run(Request::from_parts(parts, Body::empty())).await;
    };
    match pass_on(&forward.gateway, &home, &parts, bytes.clone()).await {
        Ok(response) => response,
        Err(error) => {
            tracing::warn!(
                error = %crate::error_chain::Chain(&error),
                "the instance holding a server's question could not be reached; the retry is answered here"
            );
            next.run(Request::from_parts(parts, Body::from(bytes))).await
        }
    }
}

/// Sends the request to `home` and turns its answer into this request's response.
async fn pass_on(
    gateway: &Gateway,
    home: &Home,
    parts: &axum::http::request::Parts,
    body: axum::body::Bytes,
) -> Result<Response, reqwest::Error> {
    let mut url = home.url.clone();
    url.set_path(&format!("{}{}", home.url.path().trim_end_matches('/'), parts.uri.path()));
    url.set_query(parts.uri.query());
    let mut headers = end_to_end(&parts.headers);
    headers.insert(FORWARDED, axum::http::HeaderValue::from_static("1"));
    let answer = gateway.forwarding.request(parts.method.clone(), url).headers(headers).body(body).send().await?;
    let mut response = Response::builder().status(answer.status());
    if let Some(headers) = response.headers_mut() {
        *headers = end_to_end(answer.headers());
    }
    let body = Body::from_stream(answer.bytes_stream());
    Ok(response.body(body).unwrap_or_else(|_| Response::new(Body::empty())))
}

/// `headers` without the hop-by-hop ones (RFC 9110 §7.6.1) and the length, which the next hop
/// sets for itself.
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
        let kept = end_to_end(&headers);
        let names: Vec<&str> = kept.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["host", "authorization", "content-type", "accept", "mcp-protocol-version"]);
    }
}
