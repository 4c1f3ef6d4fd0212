//! Where the browser goes after signing in or out. `next` comes from the query string, so it is
//! attacker-controlled: only a plain local path is followed, anything else becomes `/`.
// RFC 9700 §4.11 (open redirectors): never redirect to a URL taken from the request unchecked.

/// `next` if it is a local path, else `/`.
///
/// Accepted: starts with a single `/`, at most 2048 bytes, only visible ASCII, no backslash.
/// Refused: `//host` and `/\host` (protocol-relative, which browsers resolve to another host),
/// absolute URLs, and any whitespace or control character (browsers strip tabs and newlines
/// from URLs, which would turn `/\t/host` into `//host`).
pub fn safe_next(next: &str) -> &str {
    let ok = next.len() <= 2048
        && next.starts_with('/')
        && !next.starts_with("//")
        && next.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b'\\');
    if ok { next } else { "/" }
}

/// `/login?next=<next>`, with `next` made safe and percent-encoded except for path characters.
pub fn login_path(next: &str) -> String {
    let next = safe_next(next);
    let mut encoded = String::with_capacity(next.len());
    for byte in next.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'/' | b'-' | b'_' | b'.' | b'~') {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    format!("/login?next={encoded}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_are_followed() {
        for ok in ["/", "/connect/abcDEF_-123", "/a/b?c=d&e=%2F", "/connections"] {
            assert_eq!(safe_next(ok), ok);
        }
    }

    #[test]
    fn anything_that_could_leave_the_site_becomes_home() {
        for bad in [
            "",
            "//evil.example",
            "/\\evil.example",
            "\\\\evil.example",
            "https://evil.example/",
            "evil.example",
            "javascript:alert(1)",
            "/\t/evil.example",
            "/\n/evil.example",
            "/ /evil.example",
            "/\u{0}x",
            "/caf\u{e9}",
            "/a\\b",
        ] {
            assert_eq!(safe_next(bad), "/", "{bad:?} must not be followed");
        }
        assert_eq!(safe_next(&format!("/{}", "a".repeat(2048))), "/");
    }

    #[test]
    fn login_path_keeps_connect_links_readable_and_encodes_the_rest() {
        assert_eq!(login_path("/connect/abc_-1"), "/login?next=/connect/abc_-1");
        assert_eq!(login_path("/a?b=c&d"), "/login?next=/a%3Fb%3Dc%26d");
        assert_eq!(login_path("//evil.example"), "/login?next=/");
    }
}
