//! Which organization: its opaque id, which rows carry and never changes, and its slug, which
//! operators type (`--org acme`) and may rename.

use std::fmt;

use crate::domain::error::DomainError;

/// The organization every database made before organizations upgrades into, and the one new
/// users join when nothing else says which.
pub const DEFAULT_ORGANIZATION_ID: &str = "org_default";

/// An organization's id as rows carry it: `org_` and 32 hex digits, or [`DEFAULT_ORGANIZATION_ID`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct OrganizationId(String);

impl OrganizationId {
    /// A new organization's id.
    pub fn generate() -> Self {
        Self(format!("org_{}", uuid::Uuid::new_v4().simple()))
    }

    pub fn default_organization() -> Self {
        Self(DEFAULT_ORGANIZATION_ID.to_owned())
    }

    /// An id read back from the database (the store wrote it, so it is trusted as is).
    pub fn from_stored(value: String) -> Self {
        Self(value)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_default(&self) -> bool {
        self.0 == DEFAULT_ORGANIZATION_ID
    }
}

impl fmt::Display for OrganizationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An organization's slug: 1-64 of a-z, 0-9 and '-', starting with a letter or digit, so it
/// reads the same in a URL, a shell and a log line.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct OrgSlug(String);

impl OrgSlug {
    pub fn parse(value: &str) -> Result<Self, DomainError> {
        let ok = !value.is_empty()
            && value.len() <= 64
            && value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !value.starts_with('-');
        if ok { Ok(Self(value.to_owned())) } else { Err(DomainError::BadOrgSlug(value.to_owned())) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OrgSlug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a member may do in an organization. The deployment's operators (`users.is_admin`) are
/// not a role here: they manage every organization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OrgRole {
    /// Uses the organization's services and connections.
    Member,
    /// Also manages its people and services.
    Admin,
}

impl OrgRole {
    pub fn parse(value: &str) -> Result<Self, DomainError> {
        match value {
            "member" => Ok(Self::Member),
            "admin" => Ok(Self::Admin),
            other => Err(DomainError::BadOrgRole(other.to_owned())),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Member => "member",
            Self::Admin => "admin",
        }
    }
}

impl fmt::Display for OrgRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_lowercase_words_with_dashes() {
        for good in ["acme", "acme-corp", "a", "9lives", &"x".repeat(64)] {
            assert!(OrgSlug::parse(good).is_ok(), "{good}");
        }
        for bad in ["", "-acme", "Acme", "acme_corp", "acme corp", "acme/x", "ácme", &"x".repeat(65)] {
            assert_eq!(OrgSlug::parse(bad), Err(DomainError::BadOrgSlug(bad.to_owned())), "{bad}");
        }
    }

    #[test]
    fn roles_read_back_as_written() {
        for role in [OrgRole::Member, OrgRole::Admin] {
            assert_eq!(OrgRole::parse(role.as_str()), Ok(role));
        }
        assert!(OrgRole::parse("owner").is_err());
    }

    #[test]
    fn generated_ids_are_distinct_and_never_the_default() {
        let (a, b) = (OrganizationId::generate(), OrganizationId::generate());
        assert_ne!(a, b);
        assert!(a.as_str().starts_with("org_") && a.as_str().len() == 36 && !a.is_default());
        assert!(OrganizationId::default_organization().is_default());
    }
}
