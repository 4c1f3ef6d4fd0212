//! How a resource of a server behind the broker is named to the client: `gateway://{server}/`
//! followed by the server's own URI, unchanged (`note://whoami` of server `notes` is listed as
//! `gateway://notes/note://whoami`).
//!
//! Why this shape:
//! - **No collisions.** The authority is the server's registered name (`[a-z0-9-]`, unique), so
//!   two servers listing the same URI, or a server listing one of the broker's
//!   (`broker://connections`), never clash; the broker's own and the extensions' URIs never
//!   start with `gateway://`.
//! - **Reversible by text alone.** Unwrapping strips the prefix; what is left is sent to the
//!   server byte for byte. Nothing is decoded, so no two listed URIs unwrap to one, and a
//!   subscription keyed by the listed string names exactly one upstream URI.
//! - **Templates keep working.** The server's URI is appended verbatim, so a template
//!   `note://echo/{text}` becomes `gateway://notes/note://echo/{text}`, and whatever the client
//!   expands into it is exactly what the server's own template would have got. Percent-encoding
//!   the whole upstream URI into one path segment (the other obvious choice) would turn `{text}`
//!   into literals, and a value the client expands would not be encoded the way the server's
//!   template expects.
//!
//! What a client cannot do with it: the server is named only by the authority, matched exactly
//! against the registered names (no case folding, no percent-decoding, and a name has no `@`,
//! `:` or `.`, so no userinfo or port trick moves it); the rest goes to that server only, under
//! the same gates as a tool call of that server (the user's approval of the pair, the user's
//! own credential). A client may ask that server for a URI it did not list, as it could if it
//! were connected directly; the server decides what it serves.

use crate::domain::gateway::ServerName;

pub const SCHEME_PREFIX: &str = "gateway://";

/// The URI (or URI template) a client is shown for `upstream` of server `server`.
pub fn wrap(server: &ServerName, upstream: &str) -> String {
    format!("{SCHEME_PREFIX}{server}/{upstream}")
}

/// Whether `uri` is in the gateway's namespace at all (even if malformed): such a URI is never
/// handed to an extension.
pub fn is_gateway(uri: &str) -> bool {
    uri.starts_with(SCHEME_PREFIX)
}

/// The server name and upstream URI behind a listed URI; `None` if it is not one, or is
/// malformed (no valid server name, nothing after it).
pub fn unwrap(uri: &str) -> Option<(ServerName, &str)> {
    let rest = uri.strip_prefix(SCHEME_PREFIX)?;
    let (name, upstream) = rest.split_once('/')?;
    let name = ServerName::parse(name).ok()?;
    (!upstream.is_empty()).then_some((name, upstream))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(value: &str) -> ServerName {
        ServerName::parse(value).unwrap()
    }

    #[test]
    fn wrapping_then_unwrapping_gives_the_same_server_and_uri_back() {
        for upstream in
            ["note://whoami", "file:///a/../b?x=1#top", "gateway://other/x", "https://h/p%2Fq", "a b", "x://é"]
        {
            let wrapped = wrap(&name("my-notes"), upstream);
            let (server, back) = unwrap(&wrapped).unwrap();
            assert_eq!((server.as_str(), back), ("my-notes", upstream));
        }
    }

    #[test]
    fn a_template_keeps_its_variables_and_expands_as_the_servers_own() {
        let wrapped = wrap(&name("notes"), "note://echo/{text}");
        assert_eq!(wrapped, "gateway://notes/note://echo/{text}");
        assert!(crate::mcp::resources::uri::matches_template(&wrapped, "gateway://notes/note://echo/a%20b"));
        assert_eq!(unwrap("gateway://notes/note://echo/a%20b").unwrap().1, "note://echo/a%20b");
    }

    #[test]
    fn the_server_is_the_exact_authority_and_nothing_else() {
        for malformed in [
            "gateway://",
            "gateway://notes",
            "gateway://notes/",
            "gateway://Notes/x",
            "gateway://notes@other/x",
            "gateway://other:80/x",
            "gateway://no%74es/x",
            "gateway://../notes/x",
            "gateway:///x",
            "GATEWAY://notes/x",
            "gateway:notes/x",
        ] {
            assert!(unwrap(malformed).is_none(), "{malformed}");
        }
        assert!(is_gateway("gateway://Notes/x") && !is_gateway("broker://connections"));
    }
}
