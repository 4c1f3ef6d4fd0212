//! Which instance a flight waits on, so that a 2026-07-28 client's answer reaches it from any
//! instance ("stateless clients can hit any instance").
//!
//! A flight ([`super::flights`]) is a server's request waiting on the instance that asked: its
//! upstream connection, with the server's question open on it, cannot move. A stateless client
//! sends its retry wherever the load balancer puts it. So the state the broker hands the client
//! names the flight's *home* — this instance's random id and its address for other instances
//! (`[gateway] instance_url`, or the address it listens on, [`FlightHome::set_address`]) — in a
//! tag sealed apart from the state ([`FlightHome::tag`]), and an instance that receives a retry
//! whose home is another passes the request on there ([`super::retry_forward`]).
//!
//! The home is sealed (AES-256-GCM under the broker's keys, in a context of its own, owned by
//! the flight's user, expiring with the flight) because the instance that reads it sends the
//! user's request, bearer token included, to the address it names: only the broker can have
//! written that address, only for that user and only while the flight can wait, and the client
//! cannot read it. It is sealed apart from the state because the state's seal binds the whole
//! request (tool, arguments), which only rmcp reads in full, after this routing is decided; the
//! home needs only the user, known once the bearer token is checked.

use std::net::SocketAddr;
use std::sync::OnceLock;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use url::Url;

use crate::clock::Timestamp;
use crate::crypto::{SealContext, Sealer};

/// The sealer's associated data for a home: the flight's user, and a column of its own, so
/// nothing sealed for another column, or for another user, opens as a home.
fn context(user_id: &str) -> SealContext<'_> {
    SealContext { table: "mcp", column: "flightHome", row_id: "", owner: user_id }
}

/// Longer tags are not opened: a real one is about 150 characters.
const MAX_TAG_CHARS: usize = 1024;

/// The instance a flight waits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Home {
    /// Random, per process.
    pub instance: String,
    /// Where the other instances reach it.
    pub url: Url,
}

/// What a tag seals: the home, and when the flight stops waiting (broker clock, seconds).
#[derive(Serialize, Deserialize)]
struct Sealed {
    #[serde(flatten)]
    home: Home,
    expires_at: Timestamp,
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
    /// one, `http://{bound}` when that names this process for the other instances:
    /// - not an unspecified address (0.0.0.0 names no host);
    /// - a loopback address only when `public_url` is on this machine too (every instance is
    ///   then on this machine). Behind a proxy on each host, 127.0.0.1:PORT on another host is
    ///   another process, which must never get a user's request.
    ///
    /// Only the first call counts. Returns whether this instance has a home.
    pub fn set_address(&self, configured: Option<&Url>, bound: SocketAddr, public_url: &Url) -> bool {
        let url = match configured {
            Some(url) => Some(url.clone()),
            None if bound.ip().is_unspecified()
                || (bound.ip().is_loopback() && !crate::net::is_loopback(public_url)) =>
            {
                None
            }
            None => Url::parse(&format!("http://{bound}")).ok(),
        };
        let _ = self.here.set(url.map(|url| Home { instance: self.instance.clone(), url }));
        self.here.get().is_some_and(Option::is_some)
    }

    /// This instance's home sealed for a state of `user_id`'s flight that waits until
    /// `expires_at`, if the instance has an address.
    pub fn tag(&self, sealer: &Sealer, user_id: &str, expires_at: Timestamp) -> Option<String> {
        let home = self.here.get()?.as_ref()?.clone();
        // A struct of strings, a URL and a number always serialises.
        let plaintext = serde_json::to_vec(&Sealed { home, expires_at }).unwrap_or_default();
        Some(URL_SAFE_NO_PAD.encode(sealer.seal(&plaintext, context(user_id))))
    }

    /// Whether `home` is this process — or this process's address, where a restarted instance
    /// now listens: passing the request on would only reach this process again.
    pub fn is_here(&self, home: &Home) -> bool {
        home.instance == self.instance
            || self.here.get().and_then(Option::as_ref).is_some_and(|here| here.url == home.url)
    }
}

/// The home a tag of `user_id`'s names, if the broker sealed it for that user and the flight
/// can still wait at `now`; `None` for anything else.
pub fn open(sealer: &Sealer, tag: &str, user_id: &str, now: Timestamp) -> Option<Home> {
    if tag.len() > MAX_TAG_CHARS {
        return None;
    }
    let sealed = URL_SAFE_NO_PAD.decode(tag).ok()?;
    let plaintext = sealer.open(&sealed, context(user_id)).ok()?;
    let Sealed { home, expires_at } = serde_json::from_slice(&plaintext).ok()?;
    (now < expires_at).then_some(home)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer() -> Sealer {
        Sealer::new(&[7u8; 32], &[]).unwrap()
    }

    fn local() -> Url {
        Url::parse("http://127.0.0.1:8080").unwrap()
    }

    fn home_at(address: &str) -> FlightHome {
        let home = FlightHome::default();
        home.set_address(None, address.parse().unwrap(), &local());
        home
    }

    #[test]
    fn a_tag_opens_to_its_instance_on_any_instance_sharing_the_keys_and_is_here_only_there() {
        let (a, b) = (home_at("127.0.0.1:4000"), home_at("127.0.0.1:4001"));
        let tag = a.tag(&sealer(), "u1", 100).unwrap();
        let home = open(&sealer(), &tag, "u1", 99).unwrap();
        assert_eq!(home.url.as_str(), "http://127.0.0.1:4000/");
        assert!(a.is_here(&home));
        assert!(!b.is_here(&home), "another process at another address");
        assert!(!tag.contains("127.0.0.1"), "the address is not readable: {tag}");
        let restarted = home_at("127.0.0.1:4000");
        assert!(restarted.is_here(&home), "a restarted instance at the address keeps the request");
    }

    #[test]
    fn a_tag_is_its_users_only_and_only_while_the_flight_can_wait() {
        let tag = home_at("10.0.0.7:8080").tag(&sealer(), "u1", 100).unwrap();
        assert!(open(&sealer(), &tag, "u1", 99).is_some());
        assert_eq!(open(&sealer(), &tag, "u2", 99), None, "another user's request");
        assert_eq!(open(&sealer(), &tag, "u1", 100), None, "the flight stopped waiting");
    }

    #[test]
    fn only_an_address_that_names_this_process_for_the_others_is_a_home() {
        assert_eq!(home_at("0.0.0.0:8080").tag(&sealer(), "u1", 100), None);
        assert!(home_at("10.0.0.7:8080").tag(&sealer(), "u1", 100).is_some());
        // Loopback: a home only when the public URL is on this machine too.
        let public = Url::parse("https://broker.example").unwrap();
        let behind_a_local_proxy = FlightHome::default();
        behind_a_local_proxy.set_address(None, "127.0.0.1:8080".parse().unwrap(), &public);
        assert_eq!(behind_a_local_proxy.tag(&sealer(), "u1", 100), None);
        let configured = FlightHome::default();
        let given = Url::parse("http://10.0.0.7:8080").unwrap();
        configured.set_address(Some(&given), "0.0.0.0:8080".parse().unwrap(), &public);
        let home = open(&sealer(), &configured.tag(&sealer(), "u1", 100).unwrap(), "u1", 1).unwrap();
        assert_eq!(home.url.as_str(), "http://10.0.0.7:8080/");
    }

    #[test]
    fn a_tag_that_is_altered_foreign_or_sealed_for_something_else_opens_to_nothing() {
        let tag = home_at("127.0.0.1:4000").tag(&sealer(), "u1", 100).unwrap();
        let mut altered = URL_SAFE_NO_PAD.decode(&tag).unwrap();
        let last = altered.len() - 1;
        altered[last] ^= 1;
        assert_eq!(open(&sealer(), &URL_SAFE_NO_PAD.encode(altered), "u1", 1), None);
        let other_keys = Sealer::new(&[8u8; 32], &[]).unwrap();
        assert_eq!(open(&other_keys, &tag, "u1", 1), None, "another deployment's keys");
        // The same payload sealed for another column (any other sealed value of the broker's).
        let plaintext = serde_json::to_vec(&Sealed {
            home: Home { instance: "x".into(), url: Url::parse("http://evil.example").unwrap() },
            expires_at: 100,
        })
        .unwrap();
        let elsewhere = SealContext { table: "mcp", column: "requestState", row_id: "", owner: "u1" };
        assert_eq!(open(&sealer(), &URL_SAFE_NO_PAD.encode(sealer().seal(&plaintext, elsewhere)), "u1", 1), None);
        assert_eq!(open(&sealer(), "not base64!", "u1", 1), None);
        assert_eq!(open(&sealer(), &"A".repeat(MAX_TAG_CHARS + 1), "u1", 1), None);
    }
}
