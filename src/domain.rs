//! Values parsed at the edge: once a `ProviderId` or a `Scopes` exists, it is known to be
//! well formed, so the rest of the code does not re-check. Plain values that several layers
//! share live here too, below all of them: who a client is ([`ClientIdentity`]), the demo
//! provider's id ([`DEMO_PROVIDER_ID`]) and its scopes ([`demo_scopes`]), which the store keeps.

mod client;
pub mod demo_scopes;
mod error;
pub mod gateway;
mod organization;

use std::collections::BTreeSet;
use std::fmt;

pub use client::{AuthMethod, ClientIdentity, SERVICE_CLIENT_ID_PREFIX};
pub use error::DomainError;
pub use organization::{DEFAULT_ORGANIZATION_ID, OrgRole, OrgSlug, OrganizationId};

/// The built-in demo provider's id (served by the broker itself under `/demo-provider/`).
pub const DEMO_PROVIDER_ID: &str = "demo";

/// A configured provider's key, e.g. `github`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct ProviderId(String);

impl ProviderId {
    pub fn parse(value: &str) -> Result<Self, DomainError> {
        let ok = !value.is_empty()
            && value.len() <= 64
            && value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if ok { Ok(Self(value.to_owned())) } else { Err(DomainError::BadProviderId(value.to_owned())) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The built-in demo provider's id.
    pub fn demo() -> Self {
        Self(DEMO_PROVIDER_ID.to_owned())
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A set of OAuth scopes, kept sorted so equal sets compare and store equally.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(into = "Vec<String>")]
pub struct Scopes(BTreeSet<String>);

impl From<Scopes> for Vec<String> {
    fn from(value: Scopes) -> Self {
        value.0.into_iter().collect()
    }
}

impl Scopes {
    /// RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ).
    pub fn parse<I, S>(items: I) -> Result<Self, DomainError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut set = BTreeSet::new();
        for item in items {
            let item = item.as_ref();
            let valid = !item.is_empty()
                && item.len() <= 256
                && item.bytes().all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b));
            if !valid {
                return Err(DomainError::BadScope(item.to_owned()));
            }
            set.insert(item.to_owned());
        }
        Ok(Self(set))
    }

    /// Parses a space-separated list as stored in the database or returned by a provider.
    pub fn from_space_separated(value: &str) -> Result<Self, DomainError> {
        Self::parse(value.split_whitespace())
    }

    pub fn to_space_separated(&self) -> String {
        self.0.iter().cloned().collect::<Vec<_>>().join(" ")
    }

    pub fn is_superset_of(&self, other: &Scopes) -> bool {
        self.0.is_superset(&other.0)
    }

    pub fn union(&self, other: &Scopes) -> Scopes {
        Scopes(self.0.union(&other.0).cloned().collect())
    }

    /// The scopes of `self` that `other` lacks.
    pub fn difference(&self, other: &Scopes) -> Scopes {
        Scopes(self.0.difference(&other.0).cloned().collect())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, scope: &str) -> bool {
        self.0.contains(scope)
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

/// The id of an authorization row, sent to clients as `elicitationId` and used in
/// `/connect/{id}`. 32 random bytes: unguessable, so it can sit in a URL, yet never a
/// credential on its own (the connect page still requires the signed-in owner).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ElicitationId(String);

impl ElicitationId {
    pub fn generate() -> Self {
        Self(crate::crypto::random_token(32))
    }

    pub fn parse(value: &str) -> Result<Self, DomainError> {
        let ok = (22..=64).contains(&value.len())
            && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if ok { Ok(Self(value.to_owned())) } else { Err(DomainError::BadElicitationId) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ElicitationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_are_lowercase_slugs() {
        assert!(ProviderId::parse("github").is_ok());
        assert!(ProviderId::parse("google-workspace_2").is_ok());
        for bad in ["", "GitHub", "git hub", "../etc", &"x".repeat(65)] {
            assert!(ProviderId::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn scopes_are_sorted_deduplicated_and_validated() {
        let s = Scopes::from_space_separated("repo  read:user repo").unwrap();
        assert_eq!(s.to_space_separated(), "read:user repo");
        assert!(Scopes::parse(["a\"b"]).is_err());
        assert!(Scopes::parse(["a b"]).is_err());
        let more = Scopes::parse(["repo", "read:user", "gist"]).unwrap();
        assert!(more.is_superset_of(&s));
        assert!(!s.is_superset_of(&more));
        assert_eq!(more.difference(&s).to_space_separated(), "gist");
        assert!(more.contains("gist") && !s.contains("gist"));
    }

    #[test]
    fn elicitation_ids_are_long_random_and_url_safe() {
        let a = ElicitationId::generate();
        assert_eq!(a.as_str().len(), 43);
        assert_ne!(a, ElicitationId::generate());
        assert!(ElicitationId::parse(a.as_str()).is_ok());
        assert!(ElicitationId::parse("short").is_err());
        assert!(ElicitationId::parse("../../../../../../../../etc/passwd").is_err());
    }
}
