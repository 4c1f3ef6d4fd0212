//! Which scopes a provider offers, and the refusal of any other before the provider sees it.
//!
//! A scope is an opaque string to OAuth (RFC 6749 §3.3), so without a list anything well-formed
//! would be sent on — `read&redirect_uri=…`, `admin:everything`, or a thousand made-up ones.
//! Each provider's offer is its `available_scopes` (with what each allows, shown on the consent
//! page, in forms and in prompts) plus its default scopes; the operator may open it
//! (`open_scopes = true`) for providers whose scopes are too many to list.

use super::provider::ProviderConfig;
use crate::domain::Scopes;

/// More scopes than any provider's consent screen lists is not a real request.
pub const MAX_REQUESTED_SCOPES: usize = 50;

/// Why a request for scopes was refused; every face answers it as invalid input (`-32602` on
/// MCP, `400 invalid_scope` on the token API).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeRefusal {
    #[error("{provider} does not offer the scope(s) {}; it offers: {}", shown(unknown), offered.join(" "))]
    NotOffered { provider: String, unknown: Vec<String>, offered: Vec<String> },
    #[error("{count} scopes were asked for; at most {MAX_REQUESTED_SCOPES} may be")]
    TooMany { count: usize },
}

/// The first few refused scopes, each cut short: the message repeats what a caller typed.
fn shown(unknown: &[String]) -> String {
    let mut parts: Vec<String> = unknown.iter().take(5).map(|s| s.chars().take(64).collect()).collect();
    if unknown.len() > 5 {
        parts.push(format!("and {} more", unknown.len() - 5));
    }
    parts.join(", ")
}

/// The scopes `provider` offers, sorted, each with what it allows when known.
pub fn offered(provider: &ProviderConfig) -> Vec<(String, Option<String>)> {
    let mut all: Vec<&str> = provider.scope_descriptions.keys().map(String::as_str).collect();
    all.extend(provider.default_scopes.iter());
    all.sort_unstable();
    all.dedup();
    all.into_iter().map(|s| (s.to_owned(), provider.scope_description(s).map(str::to_owned))).collect()
}

/// Refuses scopes `provider` does not offer (unless its scopes are open) and absurd counts.
pub fn check(provider: &ProviderConfig, asked: &Scopes) -> Result<(), ScopeRefusal> {
    let count = asked.iter().count();
    if count > MAX_REQUESTED_SCOPES {
        return Err(ScopeRefusal::TooMany { count });
    }
    if provider.open_scopes {
        return Ok(());
    }
    let offer = offered(provider);
    let unknown: Vec<String> = asked.iter().filter(|s| !offer.iter().any(|(o, _)| o == s)).map(str::to_owned).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(ScopeRefusal::NotOffered {
        provider: provider.id.to_string(),
        unknown,
        offered: offer.into_iter().map(|(s, _)| s).collect(),
    })
}

/// What a grant holds after the provider answered: what it says it granted (its spellings
/// mapped to ours), plus the scopes asked for that it never echoes; what was asked when it
/// said nothing (RFC 6749 §5.1).
pub fn granted(provider: &ProviderConfig, returned: Option<Scopes>, asked: &Scopes) -> Scopes {
    match returned {
        None => asked.clone(),
        Some(returned) => {
            let unechoed: Vec<&str> = asked.iter().filter(|s| provider.scopes_not_returned.contains(s)).collect();
            returned.union(&Scopes::parse(unechoed).unwrap_or_default())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ProviderId;
    use crate::providers::catalogue::{ProviderFields, resolve};

    fn provider(name: &str, open: bool) -> ProviderConfig {
        let table = ProviderFields {
            client_id: Some("c".into()),
            client_secret: Some("s".into()),
            open_scopes: Some(open),
            ..Default::default()
        };
        resolve(&ProviderId::parse(name).unwrap(), table).unwrap()
    }

    #[test]
    fn only_offered_scopes_pass_unless_the_provider_is_open() {
        let github = provider("github", false);
        assert_eq!(check(&github, &Scopes::parse(["repo", "read:user"]).unwrap()), Ok(()));
        let refused = check(&github, &Scopes::parse(["repo", "admin:everything"]).unwrap()).unwrap_err();
        assert!(matches!(&refused, ScopeRefusal::NotOffered { unknown, .. } if unknown == &["admin:everything"]));
        assert!(refused.to_string().starts_with("github does not offer the scope(s) admin:everything; it offers: "));
        assert_eq!(check(&provider("github", true), &Scopes::parse(["admin:everything"]).unwrap()), Ok(()));
        let many = Scopes::parse((0..51).map(|i| format!("s{i}"))).unwrap();
        assert_eq!(check(&provider("github", true), &many), Err(ScopeRefusal::TooMany { count: 51 }));
    }

    #[test]
    fn granted_scopes_keep_the_ones_a_provider_never_echoes() {
        let entra = provider("microsoft", false);
        let asked = Scopes::parse(["openid", "offline_access", "User.Read", "Mail.Read"]).unwrap();
        let returned = Scopes::parse(["User.Read", "Mail.Read"]).unwrap();
        let held = granted(&entra, Some(returned.clone()), &asked);
        assert_eq!(held, asked, "offline_access and openid are granted though not echoed");
        assert_eq!(granted(&entra, None, &asked), asked, "no scope in the answer: as asked");
        let narrowed = granted(
            &provider("github", false),
            Some(Scopes::parse(["repo"]).unwrap()),
            &Scopes::parse(["repo", "gist"]).unwrap(),
        );
        assert_eq!(narrowed, Scopes::parse(["repo"]).unwrap(), "a narrowed answer is believed");
    }
}
