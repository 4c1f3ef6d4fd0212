//! The client's address, as throttles and the audit log see it.
//!
//! Behind a reverse proxy or load balancer every request arrives from the proxy, so the
//! client's own address is what the proxy wrote in `X-Forwarded-For`. That header is just text
//! a client can send too, so it is believed only from a peer listed in `trusted_proxies`, and
//! read from the right: each trusted proxy appends the address it received from, so the first
//! address from the right that is not a trusted proxy is the client (what a client wrote
//! itself sits further left and is ignored). Without `trusted_proxies` the header is never read.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use ipnet::IpNet;

/// The header proxies append the client's address to (de facto standard; RFC 7239's
/// `Forwarded` carries the same and is rarer in practice).
const FORWARDED_FOR: &str = "x-forwarded-for";

/// The client's address given the TCP peer, the request's headers and the trusted proxies.
pub fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    let peer = canonical(peer);
    if !is_trusted(&peer) {
        return peer;
    }
    // Every X-Forwarded-For line, in order, as one list.
    let hops: Vec<&str> = headers
        .get_all(FORWARDED_FOR)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(','))
        .map(str::trim)
        .collect();
    let mut client = peer;
    for hop in hops.iter().rev() {
        match hop.parse::<IpAddr>() {
            Ok(ip) => {
                client = canonical(ip);
                if !is_trusted(&client) {
                    return client;
                }
            }
            // Garbage (or a port, or `unknown`): the trusted hop that wrote it is the best we know.
            Err(_) => return client,
        }
    }
    client
}

/// `::ffff:192.0.2.1` is `192.0.2.1` (a dual-stack listener reports IPv4 peers that way).
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Parses a `trusted_proxies` entry: an address (`10.0.0.7`) or a range (`10.0.0.0/8`).
pub fn parse_trusted_proxy(entry: &str) -> Result<IpNet, String> {
    let entry = entry.trim();
    entry
        .parse::<IpNet>()
        .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{entry:?} is not an IP address or a CIDR range (like 10.0.0.0/8)"))
}

/// What a state hands [`ClientIp`]: the peers whose `X-Forwarded-For` is believed
/// (`trusted_proxies`). Implemented by the faces' state, so this module knows none of them.
pub trait TrustedProxies {
    fn trusted_proxies(&self) -> &[IpNet];
}

/// The client's IP: the TCP peer's, or what a trusted proxy says it is ([`client_address`]);
/// "unknown" when the server runs without connect info, as in unit tests.
#[derive(Debug, Clone)]
pub struct ClientIp(pub String);

impl<S: TrustedProxies + Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let ip = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| client_address(addr.ip(), &parts.headers, state.trusted_proxies()).to_string());
        Ok(Self(ip.unwrap_or_else(|| "unknown".into())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(lines: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for line in lines {
            map.append(FORWARDED_FOR, line.parse().unwrap());
        }
        map
    }

    fn nets(entries: &[&str]) -> Vec<IpNet> {
        entries.iter().map(|e| parse_trusted_proxy(e).unwrap()).collect()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn without_trusted_proxies_the_header_is_never_read() {
        assert_eq!(client_address(ip("203.0.113.9"), &headers(&["198.51.100.1"]), &[]), ip("203.0.113.9"));
    }

    #[test]
    fn a_spoofed_header_from_a_peer_that_is_not_a_proxy_is_ignored() {
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(client_address(ip("203.0.113.9"), &headers(&["198.51.100.1"]), &trusted), ip("203.0.113.9"));
    }

    #[test]
    fn behind_a_trusted_proxy_the_address_it_appended_is_the_client() {
        let trusted = nets(&["10.0.0.0/8"]);
        // The client wrote a fake first entry itself; the proxy appended the real address.
        let sent = headers(&["192.0.2.66, 198.51.100.1"]);
        assert_eq!(client_address(ip("10.1.2.3"), &sent, &trusted), ip("198.51.100.1"));
        // Two trusted proxies in a row, the header split over two lines.
        let chained = headers(&["192.0.2.66, 198.51.100.1", "10.9.9.9"]);
        assert_eq!(client_address(ip("10.1.2.3"), &chained, &trusted), ip("198.51.100.1"));
    }

    #[test]
    fn a_trusted_proxy_without_the_header_or_with_garbage_is_the_client() {
        let trusted = nets(&["10.0.0.7", "::1"]);
        assert_eq!(client_address(ip("10.0.0.7"), &HeaderMap::new(), &trusted), ip("10.0.0.7"));
        assert_eq!(client_address(ip("10.0.0.7"), &headers(&["unknown"]), &trusted), ip("10.0.0.7"));
        assert_eq!(client_address(ip("::1"), &headers(&["2001:db8::5"]), &trusted), ip("2001:db8::5"));
        assert_eq!(client_address(ip("::ffff:10.0.0.7"), &headers(&["192.0.2.1"]), &trusted), ip("192.0.2.1"));
    }

    #[test]
    fn bad_entries_are_refused_clearly() {
        assert!(parse_trusted_proxy("10.0.0.0/33").unwrap_err().contains("10.0.0.0/33"));
        assert!(parse_trusted_proxy("proxy.internal").is_err());
    }
}
