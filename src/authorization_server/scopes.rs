//! Scopes the authorization server grants: `[identity] scopes_supported` plus `required_scopes`
//! (a token must carry those to be useful at /mcp). A request without `scope` gets the required
//! ones (RFC 6749 §3.3 lets the server pick a default); a request naming anything else fails.

use std::collections::BTreeSet;

use crate::config::Config;
use crate::domain::Scopes;

/// RFC 6749 §3.3 `scope-token = 1*( %x21 / %x23-5B / %x5D-7E )`.
pub fn is_scope_token(token: &str) -> bool {
    !token.is_empty() && token.bytes().all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

/// Every scope this server will grant, ordered.
pub fn supported(config: &Config) -> BTreeSet<String> {
    config.identity.scopes_supported.iter().chain(&config.identity.required_scopes).cloned().collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidScope;

/// Parses a space-separated scope list: every token well-formed and in `allowed`.
pub fn parse_list(value: &str, allowed: &BTreeSet<String>) -> Result<BTreeSet<String>, InvalidScope> {
    let mut set = BTreeSet::new();
    // §3.3: single spaces separate tokens; tabs and other whitespace are not separators.
    for token in value.split(' ').filter(|s| !s.is_empty()) {
        if !is_scope_token(token) || !allowed.contains(token) {
            return Err(InvalidScope);
        }
        set.insert(token.to_owned());
    }
    Ok(set)
}

/// The scope of an authorization request: `requested` (absent → the required scopes), which
/// must be within what the server supports and, when the client registered a `scope`, within
/// that too.
pub fn for_request(
    config: &Config,
    requested: Option<&str>,
    client_scope: Option<&Scopes>,
) -> Result<BTreeSet<String>, InvalidScope> {
    let mut allowed = supported(config);
    if let Some(registered) = client_scope {
        allowed.retain(|s| registered.contains(s));
    }
    match requested {
        Some(value) => parse_list(value, &allowed),
        None => {
            let default: BTreeSet<String> = config.identity.required_scopes.iter().cloned().collect();
            if default.is_subset(&allowed) { Ok(default) } else { Err(InvalidScope) }
        }
    }
}

/// Space-separated, in order.
pub fn join(scopes: &BTreeSet<String>) -> String {
    scopes.iter().map(String::as_str).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SettingsArgs;

    fn config(toml: &str) -> Config {
        Config::from_toml(&SettingsArgs::default(), toml).unwrap()
    }

    #[test]
    fn with_no_scopes_configured_only_an_empty_scope_is_granted() {
        let c = config("");
        assert_eq!(for_request(&c, None, None), Ok(BTreeSet::new()));
        assert_eq!(for_request(&c, Some("openid"), None), Err(InvalidScope));
    }

    #[test]
    fn requests_are_limited_to_supported_and_registered_scopes() {
        let c = config("[identity]\nscopes_supported = [\"mcp:read\", \"mcp:write\"]\nrequired_scopes = [\"mcp\"]\n");
        assert_eq!(join(&for_request(&c, None, None).unwrap()), "mcp");
        assert_eq!(join(&for_request(&c, Some("mcp:write mcp"), None).unwrap()), "mcp mcp:write");
        assert_eq!(for_request(&c, Some("mcp admin"), None), Err(InvalidScope));
        assert_eq!(for_request(&c, Some("mcp\tmcp:read"), None), Err(InvalidScope));
        let registered = Scopes::parse(["mcp", "mcp:read"]).unwrap();
        assert_eq!(for_request(&c, Some("mcp:write"), Some(&registered)), Err(InvalidScope));
        assert_eq!(join(&for_request(&c, Some("mcp:read"), Some(&registered)).unwrap()), "mcp:read");
    }

    #[test]
    fn scope_tokens_exclude_quotes_backslashes_and_spaces() {
        assert!(is_scope_token("a:b/c"));
        for bad in ["", "a b", "a\"b", "a\\b", "é"] {
            assert!(!is_scope_token(bad), "{bad:?}");
        }
    }
}
