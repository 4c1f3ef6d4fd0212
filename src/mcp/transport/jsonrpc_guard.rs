//! JSON-RPC framing errors answered as JSON-RPC (JSON-RPC 2.0 §5.1), before rmcp sees the body.
//!
//! rmcp answers a POST whose JSON body it cannot deserialize with HTTP 415 and a plain-text
//! "fail to deserialize…", which tells a client nothing it can act on. Here a body that is not
//! JSON gets HTTP 400 with `-32700 Parse error`, and JSON that is not one JSON-RPC message (a
//! request or notification with `method`, or a response with `id` and `result`/`error`) gets
//! HTTP 400 with `-32600 Invalid Request`; `id` is null in both, as the spec requires when it
//! cannot be read. Only POSTs that declare JSON are checked: another content type is still
//! rmcp's 415, which is right for it. The body is parsed by serde_json, never by hand.
//!
//! The same parse reads what the request metrics count (method, tool) and the home tag of a
//! 2026-07-28 retry's `requestState` ([`FlightHomeTag`], for `crate::mcp::gateway::forward::retry_forward`).

use axum::Json;
use axum::body::{Body, to_bytes};
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
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
    let home = match classify(&bytes) {
        Verdict::Message { method, tool, home } => {
            crate::telemetry::mcp_message(method.as_deref(), tool.as_deref().map(crate::mcp::tools::catalogue::label));
            home.map(|tag| FlightHomeTag(tag.into_owned()))
        }
        Verdict::NotJson => return error(StatusCode::BAD_REQUEST, -32700, "Parse error: the body is not valid JSON"),
        Verdict::NotAMessage => {
            return error(
                StatusCode::BAD_REQUEST,
                -32600,
                "Invalid Request: not a JSON-RPC 2.0 request, notification or response",
            );
        }
    };
    let mut request = Request::from_parts(parts, Body::from(bytes));
    if let Some(home) = home {
        request.extensions_mut().insert(home);
    }
    next.run(request).await
}

/// The home tag of a request's `params.requestState`: the broker's state of a server's question
/// waiting on some instance (`crate::mcp::gateway::forward::retry_forward` reads it; nothing is opened
/// here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlightHomeTag(pub String);

#[derive(Debug, PartialEq, Eq)]
enum Verdict<'a> {
    /// A message, with what the metrics count of it: its method and, when `params` is an
    /// object with a string `name`, that name (the tool of a `tools/call`).
    Message {
        method: Option<Cow<'a, str>>,
        tool: Option<Cow<'a, str>>,
        /// The home tag of `params.requestState`, when it has one.
        home: Option<Cow<'a, str>>,
    },
    NotJson,
    NotAMessage,
}

/// What this check (and the request metrics) read of a message: the envelope, the tool's name
/// and the request state only. `params` is otherwise skipped and `result` is skipped without
/// being built (this runs on every /mcp POST, before rmcp parses the body for real).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default)]
    jsonrpc: Option<Value>,
    #[serde(default, borrow, deserialize_with = "string_or_other")]
    method: Option<Option<Cow<'a, str>>>,
    #[serde(default, borrow, deserialize_with = "params_members")]
    params: ParamsSeen<'a>,
    #[serde(default, deserialize_with = "present")]
    id: bool,
    #[serde(default, deserialize_with = "present")]
    result: bool,
    #[serde(default, deserialize_with = "present")]
    error: bool,
}

/// `Some(Some(text))` for a string, `Some(None)` for any other value (present, not a method).
fn string_or_other<'de: 'a, 'a, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<Cow<'a, str>>>, D::Error> {
    deserializer.deserialize_any(StringOrOther).map(Some)
}

struct StringOrOther;

impl<'de> Visitor<'de> for StringOrOther {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Borrowed(v)))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(Cow::Owned(v)))
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

/// What is read of `params`, when it is an object: its `name` and its `requestState`, each when
/// a string.
#[derive(Default)]
struct ParamsSeen<'a> {
    name: Option<Cow<'a, str>>,
    request_state: Option<Cow<'a, str>>,
}

/// [`ParamsSeen`]; anything else in `params` (arrays, other members, the arguments) is skipped
/// unbuilt.
fn params_members<'de: 'a, 'a, D: serde::Deserializer<'de>>(deserializer: D) -> Result<ParamsSeen<'a>, D::Error> {
    deserializer.deserialize_any(ParamsMembers)
}

struct ParamsMembers;

impl<'de> Visitor<'de> for ParamsMembers {
    type Value = ParamsSeen<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = ParamsSeen::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "name" => seen.name = map.next_value_seed(StringOrOtherSeed)?,
                "requestState" => seen.request_state = map.next_value_seed(StringOrOtherSeed)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(seen)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        StringOrOther.visit_seq(seq).map(|_| ParamsSeen::default())
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(ParamsSeen::default())
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(ParamsSeen::default())
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(ParamsSeen::default())
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(ParamsSeen::default())
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(ParamsSeen::default())
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(ParamsSeen::default())
    }
}

struct StringOrOtherSeed;

impl<'de> serde::de::DeserializeSeed<'de> for StringOrOtherSeed {
    type Value = Option<Cow<'de, str>>;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(StringOrOther)
    }
}

/// A member that is there at all (even `null`).
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(deserializer).map(|_| true)
}

/// One JSON-RPC 2.0 message: `jsonrpc: "2.0"` and a `method` (request or notification), or an
/// `id` with a `result` or an `error` (a response to a server-to-client request). JSON of
/// another shape (an array, a string) is valid JSON but no message.
fn classify(body: &[u8]) -> Verdict<'_> {
    let envelope: Envelope<'_> = match serde_json::from_slice(body) {
        Ok(envelope) => envelope,
        Err(error) if error.classify() == serde_json::error::Category::Data => return Verdict::NotAMessage,
        Err(_) => return Verdict::NotJson,
    };
    let versioned = envelope.jsonrpc.as_ref().and_then(Value::as_str) == Some("2.0");
    let request = matches!(envelope.method, Some(Some(_)));
    let response = envelope.id && (envelope.result || envelope.error);
    if !(versioned && (request || response)) {
        return Verdict::NotAMessage;
    }
    let ParamsSeen { name, request_state } = envelope.params;
    // A home tag is a part of the state: borrowed from the body when the state was.
    let home = request_state.and_then(|state| match state {
        Cow::Borrowed(state) => crate::mcp::input_required::state::home_of(state).map(Cow::Borrowed),
        Cow::Owned(state) => crate::mcp::input_required::state::home_of(&state).map(|tag| Cow::Owned(tag.to_owned())),
    });
    Verdict::Message { method: envelope.method.flatten(), tool: name, home }
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
            assert!(matches!(classify(good.to_string().as_bytes()), Verdict::Message { .. }), "{good}");
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
        // What the metrics count comes from the same parse.
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {"name": 1}, "name": "list_connections"}});
        assert_eq!(
            classify(call.to_string().as_bytes()),
            Verdict::Message { method: Some("tools/call".into()), tool: Some("list_connections".into()), home: None }
        );
        // A retry's state that names its flight's home; one that names none, or is no string.
        let retry = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "crm_ask", "requestState": "ob1.STATE.HOME", "inputResponses": {}}});
        assert_eq!(
            classify(retry.to_string().as_bytes()),
            Verdict::Message {
                method: Some("tools/call".into()),
                tool: Some("crm_ask".into()),
                home: Some("HOME".into())
            }
        );
        for state in [json!("ob1.STATE"), json!("other.STATE.HOME"), json!(5), json!({"a": "ob1.S.H"})] {
            let message = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"requestState": state}});
            assert!(
                matches!(classify(message.to_string().as_bytes()), Verdict::Message { home: None, .. }),
                "{message}"
            );
        }
        // Escaped in the body, the state is read unescaped.
        let escaped =
            br#"{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"requestState": "ob1.S.H\u0041"}}"#;
        assert!(matches!(classify(escaped), Verdict::Message { home: Some(home), .. } if home == "HA"));
        for odd_params in [json!([1, 2]), json!({"name": 5}), json!("x"), json!(null)] {
            let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": odd_params});
            assert_eq!(
                classify(message.to_string().as_bytes()),
                Verdict::Message { method: Some("tools/call".into()), tool: None, home: None },
                "{message}"
            );
        }
        let response = json!({"jsonrpc": "2.0", "id": "a", "result": {}});
        assert_eq!(
            classify(response.to_string().as_bytes()),
            Verdict::Message { method: None, tool: None, home: None }
        );
        for broken in ["{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ", "not json", ""] {
            assert_eq!(classify(broken.as_bytes()), Verdict::NotJson, "{broken}");
        }
    }
}
