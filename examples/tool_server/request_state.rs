//! The `requestState` this tool server hands a 2026-07-28 client with an `InputRequiredResult`
//! (MCP 2026-07-28, multi round-trip requests): which broker authorization the call is waiting
//! for, sealed with rmcp's [`RequestStateCodec`] (HMAC-SHA256) so that the client can only echo
//! it back, never make one up or change it.
//!
//! A state is bound (as the codec's associated data, not stored in it) to the user, the tool and
//! a digest of the arguments, and expires with the authorization. A state that fails any of these
//! checks is refused with one neutral answer: the caller learns neither whose it was nor why.
//!
//! The key is derived (HKDF-SHA256) from this server's client secret at the broker, so it is
//! configuration rather than generated at start: every replica with the same credentials opens
//! the others' states, a restart does not strand a user halfway through approving, and rotating
//! the secret (`admin services rotate-secret`) retires every state sealed with the old one.
//!
//! The user is the token's `iss` and `sub`, read without verifying the token: this server never
//! verifies user tokens, the broker does on every call. That is enough here, because a state
//! grants nothing by itself: it only says which authorization to wait on, and the answer after
//! the wait always comes from the broker for the caller's own (verified) token.

use std::time::Duration;

use hkdf::Hkdf;
use rmcp::model::{JsonObject, RequestStateCodec, SealOptions};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// HKDF `info`: this key is for nothing else than these states.
const KEY_INFO: &[u8] = b"oauth-broker example tool server: MCP requestState v1";
/// Versions the binding, so that a future layout can never open an old state by accident.
const BINDING_LABEL: &str = "whoami-request-state/1";

/// What a sealed state holds (readable by anyone who decodes it: an id, nothing secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiting {
    /// The broker's authorization id (`GET /v1/authorizations/{id}`).
    pub authorization: String,
}

/// Who asked for what: the associated data a state is sealed with and opened against.
pub struct Binding(Vec<u8>);

impl Binding {
    /// The user behind `user_token`, the tool and its arguments (absent and `{}` are the same).
    pub fn new(user_token: &SecretString, tool: &str, arguments: Option<&JsonObject>) -> Self {
        let arguments = serde_json::to_vec(&arguments.cloned().unwrap_or_default()).unwrap_or_default();
        let arguments_digest = hex::encode(Sha256::digest(arguments));
        // A JSON array: no choice of the fields' contents can make two bindings alike.
        let fields = [BINDING_LABEL, &user(user_token), tool, &arguments_digest];
        Self(serde_json::to_vec(&fields).unwrap_or_default())
    }
}

/// Why a state was refused; callers answer every case the same way (`-32602`).
#[derive(Debug, thiserror::Error)]
#[error("invalid requestState: {0}")]
pub struct Refused(#[from] rmcp::model::RequestStateError);

pub struct StateSealer {
    codec: RequestStateCodec,
}

impl StateSealer {
    /// The codec keyed from the client secret (see the module's note on why).
    pub fn from_client_secret(client_secret: &SecretString) -> anyhow::Result<Self> {
        let mut key = [0u8; 32];
        Hkdf::<Sha256>::new(None, client_secret.expose_secret().as_bytes())
            .expand(KEY_INFO, &mut key)
            .map_err(|_| anyhow::anyhow!("deriving the requestState key"))?;
        Ok(Self { codec: RequestStateCodec::try_new(key.to_vec())? })
    }

    /// Seals `waiting` for `binding`, valid for `ttl`.
    pub fn seal(&self, waiting: &Waiting, binding: &Binding, ttl: Duration) -> anyhow::Result<String> {
        let options = SealOptions::new().associated_data(&binding.0).ttl(ttl);
        Ok(self.codec.seal_json_with(waiting, &options)?)
    }

    /// Opens a state the client echoed back: forged, tampered, expired or bound to another
    /// user, tool or arguments are all [`Refused`].
    pub fn open(&self, sealed: &str, binding: &Binding) -> Result<Waiting, Refused> {
        Ok(self.codec.open_json_with(sealed, &binding.0)?)
    }
}

/// `iss sub` of a JWT; for any other token, a digest of the token itself (then the state is bound
/// to that token, which still keeps it to its holder).
fn user(user_token: &SecretString) -> String {
    #[derive(Deserialize)]
    struct Claims {
        iss: Option<String>,
        sub: Option<String>,
    }
    let claims = jsonwebtoken::dangerous::insecure_decode::<Claims>(user_token.expose_secret()).ok();
    match claims.map(|data| data.claims) {
        Some(Claims { iss, sub: Some(sub) }) => format!("sub {} {sub}", iss.unwrap_or_default()),
        _ => format!("token {}", hex::encode(Sha256::digest(user_token.expose_secret().as_bytes()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer() -> StateSealer {
        StateSealer::from_client_secret(&SecretString::from("obs_test-secret")).unwrap()
    }

    fn jwt(sub: &str) -> SecretString {
        use base64::Engine;
        let encode = |v: serde_json::Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let header = encode(serde_json::json!({"alg": "EdDSA", "typ": "JWT"}));
        let claims = encode(serde_json::json!({"iss": "https://broker.example", "sub": sub}));
        SecretString::from(format!("{header}.{claims}.c2ln"))
    }

    fn waiting() -> Waiting {
        Waiting { authorization: "a1".into() }
    }

    #[test]
    fn a_state_opens_for_the_same_user_tool_and_arguments_only() {
        let sealer = sealer();
        let args: JsonObject = serde_json::from_str(r#"{"x": 1}"#).unwrap();
        let bound = Binding::new(&jwt("alice"), "whoami", Some(&args));
        let state = sealer.seal(&waiting(), &bound, Duration::from_secs(60)).unwrap();

        assert_eq!(sealer.open(&state, &Binding::new(&jwt("alice"), "whoami", Some(&args))).unwrap(), waiting());
        assert!(sealer.open(&state, &Binding::new(&jwt("bob"), "whoami", Some(&args))).is_err());
        assert!(sealer.open(&state, &Binding::new(&jwt("alice"), "other", Some(&args))).is_err());
        assert!(sealer.open(&state, &Binding::new(&jwt("alice"), "whoami", None)).is_err());
    }

    #[test]
    fn absent_and_empty_arguments_bind_alike_and_opaque_tokens_bind_to_themselves() {
        let sealer = sealer();
        let opaque = SecretString::from("not-a-jwt");
        let state = sealer.seal(&waiting(), &Binding::new(&opaque, "whoami", None), Duration::from_secs(60)).unwrap();
        let empty = JsonObject::new();
        assert!(sealer.open(&state, &Binding::new(&opaque, "whoami", Some(&empty))).is_ok());
        assert!(sealer.open(&state, &Binding::new(&SecretString::from("not-a-jwt2"), "whoami", None)).is_err());
    }

    #[test]
    fn a_state_stops_opening_when_its_lifetime_is_over() {
        let sealer = sealer();
        let bound = || Binding::new(&jwt("alice"), "whoami", None);
        let state = sealer.seal(&waiting(), &bound(), Duration::from_millis(1)).unwrap();
        // Waits for the event (the codec's clock passing the expiry), bounded.
        let give_up = std::time::Instant::now() + Duration::from_secs(5);
        while sealer.open(&state, &bound()).is_ok() && std::time::Instant::now() < give_up {
            std::thread::yield_now();
        }
        assert!(sealer.open(&state, &bound()).is_err(), "expired");
    }

    #[test]
    fn a_tampered_or_foreign_state_is_refused() {
        let bound = || Binding::new(&jwt("alice"), "whoami", None);
        let state = sealer().seal(&waiting(), &bound(), Duration::from_secs(60)).unwrap();
        let mut tampered = state.clone().into_bytes();
        let middle = tampered.len() / 2;
        tampered[middle] = if tampered[middle] == b'A' { b'B' } else { b'A' };
        assert!(sealer().open(&String::from_utf8(tampered).unwrap(), &bound()).is_err());
        let other_key = StateSealer::from_client_secret(&SecretString::from("obs_other")).unwrap();
        assert!(other_key.open(&state, &bound()).is_err());
        assert!(sealer().open("", &bound()).is_err());
    }
}
