//! JSON-RPC framing errors answered as JSON-RPC (JSON-RPC 2.0 §5.1), before rmcp sees the body.
//!
//! rmcp answers a POST whose JSON body it cannot deserialize with HTTP 415 and a plain-text
//! "fail to deserialize…", which tells a client nothing it can act on. Here a body that is not
//! JSON gets HTTP 400 with `-32700 Parse error`, and JSON that is not one JSON-RPC message (a
//! request or notification with `method`, or a response with `id` and `result`/`error`) gets
//! HTTP 400 with `-32600 Invalid Request`; `id` is null in both, as the spec requires when it
//! cannot be read. Only POSTs that declare JSON are checked: another content type is still
//! rmcp's 415, which is right for it. The body is parsed by serde_json, never by hand.

use axum::Json;
use axum::body::{Body, to_bytes};
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

/// Largest JSON-RPC message accepted on /mcp.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

pub async fn check_jsonrpc_body(request: Request, next: Next) -> Response {
    let declares_json = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|ct| {
        ct.split(';').next().is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
    });
    if request.method() != Method::POST || !declares_json {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match to_bytes(body, MAX_MESSAGE_BYTES).await {
        Ok(bytes) => bytes,
        Err(_) => return error(StatusCode::PAYLOAD_TOO_LARGE, -32600, "the message is too large or could not be read"),
    };
    match classify(&bytes) {
        Verdict::NotJson => return error(StatusCode::BAD_REQUEST, -32700, "Parse error: the body is not valid JSON"),
        Verdict::NotAMessage => {
            return error(
                StatusCode::BAD_REQUEST,
                -32600,
                "Invalid Request: not a JSON-RPC 2.0 request, notification or response",
            );
        }
        Verdict::Message => crate::telemetry::mcp_message(&bytes),
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Message,
    NotJson,
    NotAMessage,
}

/// What this check reads of a message: the envelope only. `params` and `result` are skipped
/// without being built (this runs on every /mcp POST, before rmcp parses the body for real).
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    jsonrpc: Option<Value>,
    #[serde(default)]
    method: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    id: bool,
    #[serde(default, deserialize_with = "present")]
    result: bool,
    #[serde(default, deserialize_with = "present")]
    error: bool,
}

/// A member that is there at all (even `null`).
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(deserializer).map(|_| true)
}

/// One JSON-RPC 2.0 message: `jsonrpc: "2.0"` and a `method` (request or notification), or an
/// `id` with a `result` or an `error` (a response to a server-to-client request). JSON of
/// another shape (an array, a string) is valid JSON but no message.
fn classify(body: &[u8]) -> Verdict {
    let envelope: Envelope = match serde_json::from_slice(body) {
        Ok(envelope) => envelope,
        Err(error) if error.classify() == serde_json::error::Category::Data => return Verdict::NotAMessage,
        Err(_) => return Verdict::NotJson,
    };
    let versioned = envelope.jsonrpc.as_ref().and_then(Value::as_str) == Some("2.0");
    let request = envelope.method.as_ref().is_some_and(Value::is_string);
    let response = envelope.id && (envelope.result || envelope.error);
    if versioned && (request || response) { Verdict::Message } else { Verdict::NotAMessage }
}

fn error(status: StatusCode, code: i64, message: &str) -> Response {
    (status, Json(json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}}))).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_notifications_and_responses_are_messages_and_nothing_else_is() {
        for good in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": "a", "result": {}}),
            json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "no"}}),
        ] {
            assert_eq!(classify(good.to_string().as_bytes()), Verdict::Message, "{good}");
        }
        for bad in [
            json!({"hello": "world"}),
            json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]),
            json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": 5}),
            json!({"jsonrpc": "2.0", "id": 1}),
            json!("text"),
        ] {
            assert_eq!(classify(bad.to_string().as_bytes()), Verdict::NotAMessage, "{bad}");
        }
        for broken in ["{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ", "not json", ""] {
            assert_eq!(classify(broken.as_bytes()), Verdict::NotJson, "{broken}");
        }
    }
}
