//! Which scopes a provider offers, and the refusal of any other before the provider sees it.
//!
//! A scope is an opaque string to OAuth (RFC 6749 §3.3), so without a list anything well-formed
//! would be sent on — `read&redirect_uri=…`, `admin:everything`, or a thousand made-up ones.
//! Each provider's offer is its `available_scopes` (with what each allows, shown on the consent
//! page, in forms and in prompts) plus its default scopes; the operator may open it
//! (`open_scopes = true`) for providers whose scopes are too many to list.

use crate::config::ProviderConfig;
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
