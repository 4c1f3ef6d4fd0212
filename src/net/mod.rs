//! Facts about addresses that several faces and the settings need, kept below all of them:
//! whether a URL points at this machine ([`is_loopback`]), and who the client of a request is
//! ([`client_address`], [`ClientIp`]).

pub mod client_address;
pub mod public;

pub use client_address::{ClientIp, TrustedProxies, parse_trusted_proxy};

use url::Url;

/// Whether `url` names this machine (`localhost`, 127.0.0.0/8, `::1`): plain http is allowed
/// there, as OAuth 2.1 and RFC 8252 §8.3 allow for loopback redirect and issuer URLs.
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}
