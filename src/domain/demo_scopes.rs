//! The demo provider's scopes (`src/demo_provider/`): each one opens exactly one API endpoint.
//! Here, below the store, because its tables keep them.

use std::collections::BTreeSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DemoScope {
    /// `GET api/me`
    Profile,
    /// `GET api/notes`
    NotesRead,
    /// `POST api/notes`
    NotesWrite,
}

impl DemoScope {
    pub const ALL: [DemoScope; 3] = [DemoScope::Profile, DemoScope::NotesRead, DemoScope::NotesWrite];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Profile => "profile",
            Self::NotesRead => "notes:read",
            Self::NotesWrite => "notes:write",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Self::Profile => "See your account name",
            Self::NotesRead => "Read your notes",
            Self::NotesWrite => "Create notes",
        }
    }

    fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == value)
    }
}

/// A set of known scopes, ordered, never empty once parsed from a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeSet(BTreeSet<DemoScope>);

#[derive(Debug, PartialEq, Eq)]
pub struct UnknownScope;

impl ScopeSet {
    /// Parses a requested `scope` (RFC 6749 §3.3, space separated). Absent or blank means the
    /// default, `profile`; any unknown scope fails the whole request (`invalid_scope`).
    pub fn parse_requested(value: Option<&str>) -> Result<Self, UnknownScope> {
        let value = value.unwrap_or_default();
        // §3.3 separates scope tokens with single spaces; tabs or other whitespace are not allowed.
        let mut set = BTreeSet::new();
        for item in value.split(' ').filter(|s| !s.is_empty()) {
            set.insert(DemoScope::parse(item).ok_or(UnknownScope)?);
        }
        if set.is_empty() {
            set.insert(DemoScope::Profile);
        }
        Ok(Self(set))
    }

    /// Parses scopes as stored in our own tables (`src/store/demo/`); anything unknown
    /// fails the whole list, which the store reports as a corrupt row.
    pub fn from_stored(value: &str) -> Result<Self, UnknownScope> {
        let scopes = value.split(' ').filter(|s| !s.is_empty()).map(|s| DemoScope::parse(s).ok_or(UnknownScope));
        Ok(Self(scopes.collect::<Result<_, _>>()?))
    }

    /// Every scope: what an API key opens (`src/demo_provider/keys.rs`).
    pub fn all() -> Self {
        Self(DemoScope::ALL.into_iter().collect())
    }

    pub fn contains(&self, scope: DemoScope) -> bool {
        self.0.contains(&scope)
    }

    pub fn is_subset_of(&self, other: &ScopeSet) -> bool {
        self.0.is_subset(&other.0)
    }

    pub fn iter(&self) -> impl Iterator<Item = DemoScope> + '_ {
        self.0.iter().copied()
    }

    pub fn to_space_separated(&self) -> String {
        self.iter().map(DemoScope::as_str).collect::<Vec<_>>().join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_scope_means_profile() {
        assert_eq!(ScopeSet::parse_requested(None).unwrap().to_space_separated(), "profile");
        assert_eq!(ScopeSet::parse_requested(Some("  ")).unwrap().to_space_separated(), "profile");
    }

    #[test]
    fn known_scopes_are_ordered_and_deduplicated() {
        let s = ScopeSet::parse_requested(Some("notes:write profile notes:write")).unwrap();
        assert_eq!(s.to_space_separated(), "profile notes:write");
        assert!(s.contains(DemoScope::NotesWrite));
        assert!(!s.contains(DemoScope::NotesRead));
    }

    #[test]
    fn stored_scopes_read_back_and_unknown_ones_are_refused() {
        assert_eq!(ScopeSet::from_stored("profile notes:write").unwrap().to_space_separated(), "profile notes:write");
        assert_eq!(ScopeSet::from_stored("profile admin"), Err(UnknownScope));
    }

    #[test]
    fn one_unknown_scope_fails_the_request() {
        assert_eq!(ScopeSet::parse_requested(Some("profile admin")), Err(UnknownScope));
        assert_eq!(ScopeSet::parse_requested(Some("Profile")), Err(UnknownScope), "scopes are case-sensitive");
        assert_eq!(ScopeSet::parse_requested(Some("profile\tnotes:read")), Err(UnknownScope));
    }

    #[test]
    fn narrowing_is_a_subset_check() {
        let granted = ScopeSet::from_stored("profile notes:read").unwrap();
        assert!(ScopeSet::parse_requested(Some("notes:read")).unwrap().is_subset_of(&granted));
        assert!(!ScopeSet::parse_requested(Some("notes:write")).unwrap().is_subset_of(&granted));
    }
}
