//! What a request to a server behind the broker carries ([`Credential`], one header) and the
//! cell a connection reads it from before each request ([`CredentialCell`]); where each kind of
//! server's credential comes from; and how the server's refusal of one is recognised
//! ([`unauthorized`]).

use std::collections::HashMap;
use std::sync::RwLock;

use http::{HeaderName, HeaderValue};
use rmcp::transport::streamable_http_client::AuthRequiredError;
use secrecy::{ExposeSecret, SecretString};

use crate::broker::tokens::AccessToken;
use crate::mcp::gateway::catalogue::registry::ServerEntry;
use crate::store::gateway::GatewayAuth;

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

    pub(crate) fn current(&self) -> Option<Credential> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// `headers` with the current credential added (replacing one of the same name).
    pub(crate) fn apply(&self, mut headers: HashMap<HeaderName, HeaderValue>) -> HashMap<HeaderName, HeaderValue> {
        if let Some(credential) = self.current() {
            headers.insert(credential.header, credential.value);
        }
        headers
    }
}

impl Credential {
    /// The credential of a server that needs no user's: its secret header, or nothing.
    pub fn shared(entry: &ServerEntry) -> Option<Credential> {
        match (&entry.row.auth, &entry.secret) {
            (GatewayAuth::SecretHeader { header, .. }, Some(secret)) => {
                Credential::new(header.as_str(), secret.expose_secret())
            }
            _ => None,
        }
    }

    /// A `token-exchange` server's credential: the token minted for the user, as a bearer.
    pub fn minted(minted: &SecretString) -> Option<Credential> {
        Credential::new("Authorization", &format!("Bearer {}", minted.expose_secret()))
    }

    /// A `provider` server's credential: the user's provider token, in the header and scheme
    /// the server was registered with.
    pub fn provider(auth: &GatewayAuth, token: &AccessToken) -> Option<Credential> {
        let (_, _, header, scheme) = auth.user_credential()?;
        Credential::new(header.as_str(), &scheme.value(token.token.expose_secret()))
    }
}

/// Whether the server refused the credential (401 with a challenge) somewhere in `error`.
pub fn unauthorized(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(current) = source {
        if current.downcast_ref::<AuthRequiredError>().is_some() {
            return true;
        }
        source = current.source();
    }
    false
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
