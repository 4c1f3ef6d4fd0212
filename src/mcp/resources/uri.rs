//! Resource URIs, parsed at the edge (MCP 2025-11-25 server/resources §Security: "servers MUST
//! validate all resource URIs").
//!
//! The broker's own URIs are matched exactly: scheme `broker`, authority `connections` or
//! `providers`, and for one connection a single path segment that is a valid [`ProviderId`].
//! No query, fragment, percent-encoding, trailing slash or case folding, so one resource has
//! exactly one URI (subscriptions are keyed by the URI string). Extension templates are
//! matched at RFC 6570 level 1.

use rmcp::model::ErrorData;
use serde_json::json;

use crate::domain::ProviderId;

pub const CONNECTIONS: &str = "broker://connections";
pub const PROVIDERS: &str = "broker://providers";
pub const CONNECTION_TEMPLATE: &str = "broker://connections/{provider}";
const CONNECTION_PREFIX: &str = "broker://connections/";
const MAX_MATCHED_URI: usize = 2048;

/// A URI in the broker's own namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrokerUri {
    Connections,
    Providers,
    /// `broker://connections/{provider}`: well formed, not yet known to be configured.
    Connection(ProviderId),
}

/// How a requested URI is served.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    Broker(BrokerUri),
    /// In the broker's namespace but malformed (`broker://connections/GitHub`, `…/a/b`):
    /// not found, and never handed to an extension (the built-in shadows it).
    BrokerMalformed,
    /// Anything else: for the extensions.
    Other,
}

pub fn route(uri: &str) -> Route {
    match uri {
        CONNECTIONS => Route::Broker(BrokerUri::Connections),
        PROVIDERS => Route::Broker(BrokerUri::Providers),
        _ => match uri.strip_prefix(CONNECTION_PREFIX) {
            Some(id) => {
                ProviderId::parse(id).map_or(Route::BrokerMalformed, |id| Route::Broker(BrokerUri::Connection(id)))
            }
            None => Route::Other,
        },
    }
}

pub fn connection_uri(provider: &ProviderId) -> String {
    format!("{CONNECTION_PREFIX}{provider}")
}

/// -32002 naming the URI. It came from the client and may hold anything (markup, quotes,
/// control characters, megabytes), so it is shortened and every byte that is not a URI
/// character, plus `'`, is percent-encoded: what the message shows is still a URI, and inert.
pub fn not_found(uri: &str) -> ErrorData {
    let shown = display_uri(uri);
    ErrorData::resource_not_found(format!("resource not found: {shown}"), Some(json!({ "uri": shown })))
}

fn display_uri(uri: &str) -> String {
    const MAX: usize = 200;
    let mut shown = String::new();
    for (i, b) in uri.bytes().enumerate() {
        if i == MAX {
            shown.push_str("...");
            break;
        }
        let plain = b.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&()*+,;=%".contains(&b);
        if plain {
            shown.push(char::from(b));
        } else {
            shown.push_str(&format!("%{b:02X}"));
        }
    }
    shown
}

/// Whether `uri` is an expansion of `template` (RFC 6570 level 1: `{var}` only). Templates
/// using operators (`{+var}`, `{?var}`, …) or several names in one expression never match.
pub fn matches_template(template: &str, uri: &str) -> bool {
    // Matching backtracks; a bound keeps a hostile URI from making it expensive.
    if uri.len() > MAX_MATCHED_URI {
        return false;
    }
    let Some(parts) = parse_template(template) else { return false };
    match_parts(&parts, uri)
}

#[derive(Debug, PartialEq, Eq)]
enum Part<'a> {
    Literal(&'a str),
    Var,
}

fn parse_template(template: &str) -> Option<Vec<Part<'_>>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        match rest.find('{') {
            Some(0) => {
                let end = rest.find('}')?;
                let name = &rest[1..end];
                let valid_name = !name.is_empty()
                    && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'%');
                if !valid_name || matches!(parts.last(), Some(Part::Var)) {
                    // Two adjacent variables have no unambiguous split.
                    return None;
                }
                parts.push(Part::Var);
                rest = &rest[end + 1..];
            }
            Some(i) => {
                parts.push(Part::Literal(&rest[..i]));
                rest = &rest[i..];
            }
            None => {
                if rest.contains('}') {
                    return None;
                }
                parts.push(Part::Literal(rest));
                rest = "";
            }
        }
    }
    Some(parts)
}

fn match_parts(parts: &[Part<'_>], uri: &str) -> bool {
    match parts.split_first() {
        None => uri.is_empty(),
        Some((Part::Literal(literal), rest)) => uri.strip_prefix(literal).is_some_and(|tail| match_parts(rest, tail)),
        Some((Part::Var, rest)) => {
            // Level 1 expands a value with unreserved characters and percent-encoding only,
            // so a value ends at the first other character; try every split up to there.
            let max = simple_value_len(uri);
            (1..=max).any(|len| uri.is_char_boundary(len) && match_parts(rest, &uri[len..]))
        }
    }
}

/// Length of the longest prefix of `s` made of RFC 3986 unreserved characters and `%XX`.
fn simple_value_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            i += 1;
        } else if b == b'%' && bytes.get(i + 1..i + 3).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
            i += 3;
        } else {
            break;
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_broker_uris_are_matched_exactly() {
        assert_eq!(route("broker://connections"), Route::Broker(BrokerUri::Connections));
        assert_eq!(route("broker://providers"), Route::Broker(BrokerUri::Providers));
        assert_eq!(
            route("broker://connections/github"),
            Route::Broker(BrokerUri::Connection(ProviderId::parse("github").unwrap()))
        );
        for malformed in [
            "broker://connections/",
            "broker://connections/GitHub",
            "broker://connections/demo/",
            "broker://connections/a/b",
            "broker://connections/demo?x=1",
            "broker://connections/demo#top",
            "broker://connections/%64emo",
            "broker://connections/../providers",
        ] {
            assert_eq!(route(malformed), Route::BrokerMalformed, "{malformed}");
        }
        for other in
            ["BROKER://connections", "broker://connections?x", "broker://providers/", "broker://x", "file:///etc"]
        {
            assert_eq!(route(other), Route::Other, "{other}");
        }
    }

    #[test]
    fn not_found_names_the_uri_escaped_and_shortened() {
        let error = not_found("broker://connections/<script>'\"\n é");
        assert_eq!(error.code.0, -32002);
        assert_eq!(error.message, "resource not found: broker://connections/%3Cscript%3E%27%22%0A%20%C3%A9");
        assert_eq!(error.data.unwrap()["uri"], "broker://connections/%3Cscript%3E%27%22%0A%20%C3%A9");
        let long = format!("x://{}", "a".repeat(10_000));
        assert!(not_found(&long).message.len() < 300);
    }

    #[test]
    fn level_one_templates_match_simple_values_only() {
        assert!(matches_template("test://template/{id}/data", "test://template/123/data"));
        assert!(matches_template("test://t/{id}", "test://t/a%20b"));
        assert!(matches_template("test://{a}.{b}", "test://x.y.z"));
        assert!(matches_template("test://static", "test://static"));
        assert!(!matches_template("test://template/{id}/data", "test://template//data"));
        assert!(!matches_template("test://template/{id}/data", "test://template/a/b/data"));
        assert!(!matches_template("test://t/{id}", "test://t/a?b"));
        assert!(!matches_template("test://t/{id}", "test://t/%zz"));
        assert!(!matches_template("test://t/{+path}", "test://t/a"));
        assert!(!matches_template("test://t/{a}{b}", "test://t/ab"));
        assert!(!matches_template("test://t/{id", "test://t/x"));
    }
}
