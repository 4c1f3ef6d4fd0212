//! Facts about addresses that several faces and the settings need, kept below all of them:
//! whether a URL points at this machine ([`is_loopback`]), who the client of a request is
//! ([`client_address`], [`ClientIp`]), and keeping an HTTP/1.1 connection usable after a
//! response that left the request body unread ([`drain_body`]).

pub mod client_address;
pub mod drain_body;
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

/// Why an upstream URL (a gateway server's MCP endpoint) is refused, or `Ok`: the rules of the
/// broker's other outbound URLs (provider endpoints, `src/providers/catalogue.rs`) — https, or
/// plain http only on a loopback host — and nothing a URL should not carry to a server:
/// no user info (a credential in a URL ends up in logs), no fragment.
pub fn check_upstream_url(url: &Url) -> Result<(), &'static str> {
    match url.scheme() {
        "https" => {}
        "http" if is_loopback(url) => {}
        "http" => return Err("must use https (plain http only on 127.0.0.1, localhost or [::1])"),
        _ => return Err("must be an https URL"),
    }
    if url.host().is_none() {
        return Err("must name a host");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry user info (give a secret with --auth secret-header instead)");
    }
    if url.fragment().is_some() {
        return Err("must not have a fragment");
    }
    Ok(())
}

/// What went wrong with an outbound request, in words that never carry its URL (whose query
/// could hold a secret).
pub fn request_failure(error: &reqwest::Error) -> &'static str {
    if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else {
        "request failed"
    }
}

#[cfg(test)]
mod upstream_url_tests {
    use super::*;

    #[test]
    fn an_upstream_url_is_https_or_loopback_http_without_user_info() {
        for good in ["https://mcp.example/mcp", "http://127.0.0.1:9000/mcp", "http://localhost/mcp", "http://[::1]:1/"]
        {
            assert!(check_upstream_url(&Url::parse(good).unwrap()).is_ok(), "{good}");
        }
        for bad in [
            "http://mcp.example/mcp",
            "http://10.0.0.1/mcp",
            "ftp://mcp.example/",
            "https://user:pw@mcp.example/",
            "https://mcp.example/mcp#x",
            "file:///etc/passwd",
        ] {
            assert!(check_upstream_url(&Url::parse(bad).unwrap()).is_err(), "{bad}");
        }
    }
}
