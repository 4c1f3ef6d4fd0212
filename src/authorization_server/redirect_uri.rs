//! Which redirect URIs a client may register (MCP 2025-11-25 basic/authorization §Security:
//! "Redirect URIs MUST be either localhost or use HTTPS"; OAuth 2.1 §2.3.1, RFC 8252 §7.3).
//!
//! Accepted: `https://host/…`, and plain http only on loopback (`http://127.0.0.1:*`,
//! `http://[::1]:*`, `http://localhost:*`). Refused: fragments, user info, whitespace and
//! control characters, other schemes. Matching at `/authorize` is exact string comparison
//! against the strings registered here, never a prefix or a normalised form.

use url::{Host, Url};

/// At most this many redirect URIs per client.
pub const MAX_REDIRECT_URIS: usize = 10;
const MAX_LEN: usize = 2000;

/// Checks one redirect URI; the error is a fixed sentence for `error_description`.
pub fn validate(uri: &str) -> Result<Url, &'static str> {
    if uri.is_empty() || uri.len() > MAX_LEN {
        return Err("a redirect URI is empty or longer than 2000 characters");
    }
    if !uri.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err("a redirect URI contains whitespace, control or non-ASCII characters");
    }
    // OAuth 2.1 §2.3.1: no fragment component (not even an empty one).
    if uri.contains('#') {
        return Err("a redirect URI must not contain a fragment");
    }
    let url = Url::parse(uri).map_err(|_| "a redirect URI is not an absolute URL")?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("a redirect URI must not contain user information");
    }
    match url.scheme() {
        "https" if url.host_str().is_some_and(|h| !h.is_empty()) => Ok(url),
        "http" if is_loopback_host(&url) => Ok(url),
        "http" => Err("plain http redirect URIs are only allowed on loopback (127.0.0.1, [::1], localhost)"),
        _ => Err("redirect URIs must use https (or http on loopback)"),
    }
}

fn is_loopback_host(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(domain)) => domain == "localhost",
        Some(Host::Ipv4(ip)) => ip == std::net::Ipv4Addr::LOCALHOST,
        Some(Host::Ipv6(ip)) => ip == std::net::Ipv6Addr::LOCALHOST,
        None => false,
    }
}

/// The host a redirect URI sends the browser to, for the consent page.
pub fn host_of(uri: &str) -> String {
    Url::parse(uri)
        .ok()
        .and_then(|u| {
            let host = u.host_str()?.to_owned();
            Some(match u.port() {
                Some(port) => format!("{host}:{port}"),
                None => host,
            })
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_and_loopback_http_are_accepted() {
        for ok in [
            "https://app.example/callback",
            "https://app.example:8443/cb?x=1",
            "http://127.0.0.1:33418/callback",
            "http://[::1]:9/cb",
            "http://localhost:8080/oauth/callback",
            "http://127.0.0.1/cb",
        ] {
            assert!(validate(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn everything_else_is_refused() {
        for bad in [
            "",
            "/relative",
            "http://evil.example/cb",
            "http://127.0.0.2/cb",
            "http://localhost.evil.example/cb",
            "https://app.example/cb#frag",
            "https://app.example/cb#",
            "https://user:pw@app.example/cb",
            "https://app.example/a b",
            "javascript:alert(1)",
            "com.example.app:/callback",
            "ftp://app.example/cb",
        ] {
            assert!(validate(bad).is_err(), "{bad:?} must be refused");
        }
        assert!(validate(&format!("https://a.example/{}", "a".repeat(2000))).is_err());
    }

    #[test]
    fn the_consent_page_shows_host_and_port() {
        assert_eq!(host_of("http://127.0.0.1:33418/callback"), "127.0.0.1:33418");
        assert_eq!(host_of("https://app.example/cb"), "app.example");
    }
}
