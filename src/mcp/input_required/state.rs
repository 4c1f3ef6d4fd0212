//! The `requestState` the broker hands a 2026-07-28 client and reads back on its retry.
//!
//! The client echoes it verbatim, so what comes back is untrusted input (SEP-2322): it is sealed
//! with the broker's own sealer ([`crate::crypto::Sealer`], AES-256-GCM under the encryption
//! key ring: any instance sharing the keys opens it, and a rotation reaches it like every other
//! sealed value), which keeps it confidential as well as intact. The AEAD's associated data is
//! the request it belongs to — user, client, method, tool and a digest of the arguments
//! ([`Binding`]) — so a state lifted into another user's, client's or tool's request, or one
//! whose arguments changed, does not open. Its expiry is read on the broker's clock.
//!
//! Every way of failing to open is one answer to the client ([`refused`]): it never says whose
//! the state was or why it did not fit.
//!
//! rmcp's `RequestStateCodec` (HMAC) would need a key derived per ring entry and rebuilt on every
//! reload; the sealer already is the ring, and encrypts.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rmcp::model::ErrorData;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::clock::Timestamp;
use crate::crypto::{SealContext, Sealer};

/// Longer states are refused before anything is decoded: a real one is a few hundred bytes.
const MAX_STATE_CHARS: usize = 16 * 1024;

/// What every state the broker makes starts with, so an extension's own states (which the
/// broker passes to the extension unread) are told apart without opening anything.
const PREFIX: &str = "ob1.";

/// Whether `state` is one of the broker's (by its form; whether it opens is another matter).
pub(crate) fn is_ours(state: &str) -> bool {
    state.starts_with(PREFIX)
}

/// What separates a state from the home of the flight it names (`crate::mcp::gateway::forward::flight_home`):
/// not in base64url's alphabet.
const HOME_SEPARATOR: char = '.';

/// `state` naming the instance its flight waits on (`tag`, sealed apart: it is read before the
/// request is known, [`home_of`]).
pub(crate) fn with_home(state: String, tag: &str) -> String {
    format!("{state}{HOME_SEPARATOR}{tag}")
}

/// The home tag of one of the broker's states, if it names one.
pub(crate) fn home_of(state: &str) -> Option<&str> {
    state.strip_prefix(PREFIX)?.split_once(HOME_SEPARATOR).map(|(_, tag)| tag)
}

/// What a state carries from one round to the next.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Carried {
    /// Random; names the state for single use
    /// ([`crate::store::request_states::RequestStates::spend`]).
    pub nonce: String,
    /// Broker clock, seconds: after this the state is refused.
    pub expires_at: Timestamp,
    /// The authorization (connect or consent link) the user was sent to in the browser.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<String>,
    /// The question this state asked (its key in `inputRequests`): the answer to it is acted on
    /// once, so such a state is single use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<String>,
    /// Answers to earlier questions of this call, already checked against their forms, by key:
    /// a later round (after the browser, say) runs the tool again and must not ask them again.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub answers: Map<String, Value>,
    /// A server behind the broker asked the user (its own `InputRequiredResult`): what goes
    /// back to it with the client's answers. Sealed here, the client can neither read nor
    /// alter it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerRound>,
    /// A server behind the broker asked the user mid-call (a nested `elicitation/create`) while
    /// its call keeps running on the instance that made this state: which call, and the key the
    /// client answers under (`crate::mcp::gateway::forward::flights`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flight: Option<FlightRound>,
}

/// A server's question asked mid-call, waiting in this instance's table of flights for the
/// client's answer (`crate::mcp::gateway::forward::flights`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct FlightRound {
    /// The registered server's id.
    pub server_id: String,
    /// The flight's id in the table (random; the table also checks the owner).
    pub flight: String,
    /// The key of the question in `inputRequests`.
    pub key: String,
}

/// A round trip of a server behind the broker (`crate::mcp::gateway::forward::rounds`), as carried in the
/// broker's own state.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct ServerRound {
    /// The registered server's id: the state is no use for any other.
    pub server_id: String,
    /// The server's own `requestState`, returned to it unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The keys of the server's `inputRequests`: only the client's answers to these go back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
}

/// The request a state belongs to, as the sealer's associated data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binding {
    user_id: String,
    /// Hex SHA-256 of the JSON array `[user, client, method, name, arguments]` (arguments with
    /// their keys sorted): unambiguous whatever the parts contain.
    digest: String,
}

impl Binding {
    pub fn new(user_id: &str, client: &str, method: &str, name: &str, arguments: Option<&Map<String, Value>>) -> Self {
        let arguments = canonical(&Value::Object(arguments.cloned().unwrap_or_default()));
        let parts = serde_json::json!([user_id, client, method, name, arguments]);
        let digest = hex::encode(Sha256::digest(parts.to_string().as_bytes()));
        Self { user_id: user_id.to_owned(), digest }
    }

    fn context(&self) -> SealContext<'_> {
        SealContext { table: "mcp", column: "requestState", row_id: &self.digest, owner: &self.user_id }
    }
}

/// The same value with every object's keys in order, so the digest does not depend on the order
/// a client wrote them in.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), canonical(&map[k]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// Seals `carried` for the request `binding` names.
pub(crate) fn seal(sealer: &Sealer, binding: &Binding, carried: &Carried) -> String {
    // A struct of strings, numbers and JSON values always serialises.
    let plaintext = serde_json::to_vec(carried).unwrap_or_default();
    format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(sealer.seal(&plaintext, binding.context())))
}

/// Opens a state the client sent back for the request `binding` names, refusing anything forged,
/// altered, made for another request or expired at `now`.
pub(crate) fn open(sealer: &Sealer, binding: &Binding, state: &str, now: Timestamp) -> Result<Carried, ErrorData> {
    if state.len() > MAX_STATE_CHARS {
        return Err(refused());
    }
    let encoded = state.strip_prefix(PREFIX).ok_or_else(refused)?;
    // The flight's home, if any, is routing, not the state (its own seal, `home_of`).
    let encoded = encoded.split_once(HOME_SEPARATOR).map_or(encoded, |(state, _)| state);
    let sealed = URL_SAFE_NO_PAD.decode(encoded).map_err(|_| refused())?;
    let plaintext = sealer.open(&sealed, binding.context()).map_err(|_| refused())?;
    let carried: Carried = serde_json::from_slice(&plaintext).map_err(|_| refused())?;
    if carried.expires_at <= now {
        return Err(refused());
    }
    Ok(carried)
}

/// The one answer to a state that cannot be used (`-32602`, SEP-2322): the same words whatever
/// the reason, and nothing about whose it was.
pub(crate) fn refused() -> ErrorData {
    ErrorData::invalid_params(
        "requestState is not valid for this request (it may have expired, or been used already); call again without it",
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sealer() -> Sealer {
        Sealer::new(&[7u8; 32], &[]).unwrap()
    }

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    fn carried() -> Carried {
        Carried {
            nonce: "n".into(),
            expires_at: 1_000,
            authorization: Some("a1".into()),
            asked: None,
            answers: Map::new(),
            server: None,
            flight: None,
        }
    }

    #[test]
    fn a_state_opens_for_its_own_request_only() {
        let sealer = sealer();
        let arguments = args(json!({"provider": "demo", "method": "GET", "path": "/me"}));
        let binding = Binding::new("u1", "c1", "tools/call", "provider_request", Some(&arguments));
        let state = seal(&sealer, &binding, &carried());
        assert_eq!(open(&sealer, &binding, &state, 999).unwrap(), carried());

        let others = [
            Binding::new("u2", "c1", "tools/call", "provider_request", Some(&arguments)),
            Binding::new("u1", "c2", "tools/call", "provider_request", Some(&arguments)),
            Binding::new("u1", "c1", "tools/call", "connect_account", Some(&arguments)),
            Binding::new("u1", "c1", "prompts/get", "provider_request", Some(&arguments)),
            Binding::new(
                "u1",
                "c1",
                "tools/call",
                "provider_request",
                Some(&args(json!({"provider": "demo", "method": "DELETE", "path": "/me"}))),
            ),
            Binding::new("u1", "c1", "tools/call", "provider_request", None),
        ];
        for other in others {
            let error = open(&sealer, &other, &state, 999).unwrap_err();
            assert_eq!(error, refused(), "{other:?}");
        }
    }

    #[test]
    fn a_flights_home_rides_beside_the_state_without_changing_what_opens() {
        let sealer = sealer();
        let binding = Binding::new("u1", "c1", "tools/call", "t", None);
        let state = seal(&sealer, &binding, &carried());
        assert_eq!(home_of(&state), None);
        let homed = with_home(state.clone(), "HOME-TAG");
        assert_eq!(home_of(&homed), Some("HOME-TAG"));
        assert!(is_ours(&homed));
        assert_eq!(open(&sealer, &binding, &homed, 999).unwrap(), carried(), "the home is not part of the seal");
        assert_eq!(home_of("ext.AAAA.BBBB"), None, "an extension's state names no home of ours");
    }

    #[test]
    fn argument_order_does_not_matter_but_values_do() {
        let a = args(json!({"provider": "demo", "query": {"a": 1, "b": 2}}));
        let b = args(json!({"query": {"b": 2, "a": 1}, "provider": "demo"}));
        let c = args(json!({"query": {"b": 2, "a": 3}, "provider": "demo"}));
        let bind = |x: &Map<String, Value>| Binding::new("u", "c", "tools/call", "t", Some(x));
        assert_eq!(bind(&a), bind(&b));
        assert_ne!(bind(&a), bind(&c));
    }

    #[test]
    fn an_expired_tampered_or_foreign_state_is_refused_with_one_answer() {
        let sealer = sealer();
        let binding = Binding::new("u1", "c1", "tools/call", "t", None);
        let state = seal(&sealer, &binding, &carried());
        assert_eq!(open(&sealer, &binding, &state, 1_000).unwrap_err(), refused(), "expired at its time");

        let mut bytes = URL_SAFE_NO_PAD.decode(state.strip_prefix(PREFIX).unwrap()).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let tampered = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes));
        assert_eq!(open(&sealer, &binding, &tampered, 1).unwrap_err(), refused());

        let other_keys = Sealer::new(&[9u8; 32], &[]).unwrap();
        assert_eq!(open(&other_keys, &binding, &state, 1).unwrap_err(), refused(), "another broker's keys");
        for junk in ["", "ob1.", "ob1.not base64!", "ob1.AAAA", "AAAA", &format!("ob1.{}", "A".repeat(MAX_STATE_CHARS))]
        {
            assert_eq!(open(&sealer, &binding, junk, 1).unwrap_err(), refused(), "{junk:.20}");
        }
        let message = refused().message;
        assert!(!message.contains("u1") && !message.contains("c1"), "says nothing of whose it was");
    }

    #[test]
    fn a_state_is_not_readable_by_the_client() {
        let sealer = sealer();
        let binding = Binding::new("u1", "c1", "tools/call", "t", None);
        let mut with_answer = carried();
        with_answer.answers.insert("form".into(), json!({"account": "work-account"}));
        let state = seal(&sealer, &binding, &with_answer);
        let bytes = URL_SAFE_NO_PAD.decode(state.strip_prefix(PREFIX).unwrap()).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("work-account") && !text.contains("a1"), "sealed, not just signed");

        let mut relayed = carried();
        relayed.server = Some(ServerRound {
            server_id: "s1".into(),
            state: Some("server-own-state".into()),
            keys: vec!["name".into()],
        });
        let state = seal(&sealer, &binding, &relayed);
        let bytes = URL_SAFE_NO_PAD.decode(state.strip_prefix(PREFIX).unwrap()).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("server-own-state"), "a server's state is sealed too");
        assert_eq!(open(&sealer, &binding, &state, 1).unwrap(), relayed);
    }

    #[test]
    fn a_state_sealed_before_a_rotation_still_opens() {
        let old = Sealer::new(&[7u8; 32], &[]).unwrap();
        let binding = Binding::new("u1", "c1", "tools/call", "t", None);
        let state = seal(&old, &binding, &carried());
        let rotated = Sealer::new(&[8u8; 32], &[&[7u8; 32]]).unwrap();
        assert_eq!(open(&rotated, &binding, &state, 1).unwrap(), carried());
    }
}
