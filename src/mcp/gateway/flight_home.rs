//! Which instance a flight waits on, so that a 2026-07-28 client's answer reaches it from any
//! instance (issue 26, item 6: "stateless clients can hit any instance").
//!
//! A flight ([`super::flights`]) is a server's request waiting on the instance that asked: its
//! upstream connection, with the server's question open on it, cannot move. A stateless client
//! sends its retry wherever the load balancer puts it. So the state the broker hands the client
//! names the flight's *home* — this instance's random id and its address for other instances
//! (`[gateway] instance_url`, by default the address it listens on) — sealed apart from the
//! state itself ([`tag`]), and an instance that receives a retry whose home is another passes
//! the request on there unchanged ([`super::retry_forward`]).
//!
//! The home is sealed (AES-256-GCM under the broker's keys, in a context of its own) because
//! the instance that reads it sends the user's request, bearer token included, to the address it
//! names: only the broker can have written that address, and the client cannot read it. It is
//! sealed apart from the state because the state opens only for its own user's request, which
//! the instance learns after rmcp has read the body; the home must be read before.

use std::net::SocketAddr;
use std::sync::OnceLock;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use url::Url;

use crate::crypto::{SealContext, Sealer};

/// The sealer's associated data for a home: no row, no owner — any instance opens it, nothing
/// sealed for another column does.
const CONTEXT: SealContext<'static> = SealContext { table: "mcp", column: "flightHome", row_id: "", owner: "" };

/// Longer tags are not opened: a real one is about 150 characters.
const MAX_TAG_CHARS: usize = 1024;

/// The instance a flight waits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Home {
    /// Random, per process: a restarted instance at the same address is another home.
    pub instance: String,
    /// Where the other instances reach it.
    pub url: Url,
}

/// This instance as a home for its flights.
#[derive(Debug)]
pub struct FlightHome {
    instance: String,
    /// Set once the listener is bound; `None` inside when the instance has no address other
    /// instances could use.
    here: OnceLock<Option<Home>>,
}

impl Default for FlightHome {
    fn default() -> Self {
        Self { instance: crate::crypto::random_token(16), here: OnceLock::new() }
    }
}

impl FlightHome {
    /// Records this instance's address: `configured` (`[gateway] instance_url`) or, without
    /// one, `http://{bound}` unless `bound` is an unspecified address (0.0.0.0 names no host
    /// another instance can reach). Only the first call counts.
    pub fn set_address(&self, configured: Option<&Url>, bound: SocketAddr) {
        let url = match configured {
            Some(url) => Some(url.clone()),
            None if bound.ip().is_unspecified() => {
                tracing::info!(
                    "no [gateway] instance_url and listening on {bound}: a 2026-07-28 client's answer to a server's \
                     question that reaches another instance is told to send its request again"
                );
                None
            }
            None => Url::parse(&format!("http://{bound}")).ok(),
        };
        let _ = self.here.set(url.map(|url| Home { instance: self.instance.clone(), url }));
    }

    /// This instance's home sealed for a state, if it has an address.
    pub fn tag(&self, sealer: &Sealer) -> Option<String> {
        let home = self.here.get()?.as_ref()?;
        // A struct of a string and a URL always serialises.
        let plaintext = serde_json::to_vec(home).unwrap_or_default();
        Some(URL_SAFE_NO_PAD.encode(sealer.seal(&plaintext, CONTEXT)))
    }

    /// Whether `home` is this very process.
    pub fn is_here(&self, home: &Home) -> bool {
        home.instance == self.instance
    }
}

/// The home a tag names, if the broker sealed it; `None` for anything else.
pub fn open(sealer: &Sealer, tag: &str) -> Option<Home> {
    if tag.len() > MAX_TAG_CHARS {
        return None;
    }
    let sealed = URL_SAFE_NO_PAD.decode(tag).ok()?;
    let plaintext = sealer.open(&sealed, CONTEXT).ok()?;
    serde_json::from_slice(&plaintext).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer() -> Sealer {
        Sealer::new(&[7u8; 32], &[]).unwrap()
    }

    fn home_at(address: &str) -> FlightHome {
        let home = FlightHome::default();
        home.set_address(None, address.parse().unwrap());
        home
    }

    #[test]
    fn a_tag_opens_to_its_instance_on_any_instance_sharing_the_keys_and_is_here_only_there() {
        let (a, b) = (home_at("127.0.0.1:4000"), home_at("127.0.0.1:4001"));
        let tag = a.tag(&sealer()).unwrap();
        let home = open(&sealer(), &tag).unwrap();
        assert_eq!(home.url.as_str(), "http://127.0.0.1:4000/");
        assert!(a.is_here(&home));
        assert!(!b.is_here(&home), "another process is another home, whatever its address");
        assert!(!tag.contains("127.0.0.1"), "the address is not readable: {tag}");
    }

    #[test]
    fn an_unspecified_address_is_no_home_unless_one_is_configured() {
        assert_eq!(home_at("0.0.0.0:8080").tag(&sealer()), None);
        let configured = FlightHome::default();
        configured.set_address(Some(&Url::parse("http://10.0.0.7:8080").unwrap()), "0.0.0.0:8080".parse().unwrap());
        let home = open(&sealer(), &configured.tag(&sealer()).unwrap()).unwrap();
        assert_eq!(home.url.as_str(), "http://10.0.0.7:8080/");
    }

    #[test]
    fn a_tag_that_is_altered_foreign_or_sealed_for_something_else_opens_to_nothing() {
        let tag = home_at("127.0.0.1:4000").tag(&sealer()).unwrap();
        let mut altered = URL_SAFE_NO_PAD.decode(&tag).unwrap();
        let last = altered.len() - 1;
        altered[last] ^= 1;
        assert_eq!(open(&sealer(), &URL_SAFE_NO_PAD.encode(altered)), None);
        let other_keys = Sealer::new(&[8u8; 32], &[]).unwrap();
        assert_eq!(open(&other_keys, &tag), None, "another deployment's keys");
        // The same address sealed for another column (any other sealed value of the broker's).
        let plaintext =
            serde_json::to_vec(&Home { instance: "x".into(), url: Url::parse("http://evil.example").unwrap() })
                .unwrap();
        let elsewhere = SealContext { table: "mcp", column: "requestState", row_id: "", owner: "" };
        assert_eq!(open(&sealer(), &URL_SAFE_NO_PAD.encode(sealer().seal(&plaintext, elsewhere))), None);
        assert_eq!(open(&sealer(), "not base64!"), None);
        assert_eq!(open(&sealer(), &"A".repeat(MAX_TAG_CHARS + 1)), None);
    }
}
