//! Where one connection stands, decided once for every face: the token API's
//! `GET /v1/connections`, `list_connections` and the `broker://` resources, the connections
//! page and the admin views all render this [`Status`]; none of them looks at a grant's columns
//! to decide for itself.
//!
//! The status is read from the stored grant, without calling the provider: whether the
//! provider refused it (`invalid_grant` → [`Status::Revoked`]; a token that cannot be renewed
//! or opened → [`Status::NeedsReconsent`]), whether it carries what the caller requires, whether
//! its last refresh failed ([`Status::RefreshFailing`], with the kind and when the backoff of
//! [`super::backoff`] lets the next try happen), and — for a caller that is a client — whether
//! the user allowed that client to use it.

use crate::clock::Timestamp;
use crate::domain::Scopes;
use crate::store::grants::{GrantRow, GrantStatus, RefreshFailure};

/// Where the user stands with one account (or provider), coarsely: what `list_connections`'
/// `status` has always said. [`Status::coarse`] maps the full status onto it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionStatus {
    /// A grant that works (refreshed as needed).
    Connected,
    /// The provider no longer accepts the grant: only connecting again helps.
    NeedsReconsent,
    /// No grant.
    NotConnected,
}

impl ConnectionStatus {
    pub fn of(grant: Option<&GrantRow>) -> Self {
        match grant {
            Some(g) if g.status == GrantStatus::Active => ConnectionStatus::Connected,
            Some(_) => ConnectionStatus::NeedsReconsent,
            None => ConnectionStatus::NotConnected,
        }
    }

    /// The name faces show (`list_connections`' `status`).
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionStatus::Connected => "connected",
            ConnectionStatus::NeedsReconsent => "needs_reconsent",
            ConnectionStatus::NotConnected => "not_connected",
        }
    }
}

/// Where one connection stands for a caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Usable as it stands (refreshed as needed).
    Ready,
    /// The broker can no longer use the grant (its access token expired with no refresh token,
    /// or a stored token no longer opens): the user must connect again.
    NeedsReconsent { why: Option<RefreshFailure> },
    /// The provider refused the grant (`invalid_grant`: the user revoked the access there, or
    /// the provider expired it): the user must connect again.
    Revoked,
    /// Connected without every scope the caller requires.
    MissingScopes { missing: Scopes },
    /// The last refresh failed; the grant is kept and tried again from `retry_at` (`None`: at
    /// the next use). `failures` counts transient failures in a row.
    RefreshFailing { error: RefreshFailure, failures: i64, retry_at: Option<Timestamp> },
    /// Connected, but the asking client may not use the connection until the user allows it.
    ConsentRequired,
    /// No connection.
    NotConnected,
}

impl Status {
    /// The status of `grant` (`None`: no connection) at `now`, for a caller that requires
    /// `required` and, when the caller is a client, may (`Some(true)`) or may not use it yet.
    pub fn of(grant: Option<&GrantRow>, now: Timestamp, required: &Scopes, allowed: Option<bool>) -> Self {
        let Some(grant) = grant else { return Status::NotConnected };
        let last_error = grant.refresh_gate.last_error;
        if grant.status == GrantStatus::NeedsReconsent {
            return match last_error {
                Some(RefreshFailure::InvalidGrant) => Status::Revoked,
                why => Status::NeedsReconsent { why },
            };
        }
        if !grant.scopes.is_superset_of(required) {
            return Status::MissingScopes { missing: required.difference(&grant.scopes) };
        }
        if allowed == Some(false) {
            return Status::ConsentRequired;
        }
        if let Some(error) = last_error {
            let retry_at = grant.refresh_gate.not_before.filter(|at| *at > now);
            return Status::RefreshFailing { error, failures: grant.refresh_gate.failures, retry_at };
        }
        Status::Ready
    }

    /// The stable name every face shows.
    pub fn code(&self) -> &'static str {
        match self {
            Status::Ready => "ready",
            Status::NeedsReconsent { .. } => "needs_reconsent",
            Status::Revoked => "revoked",
            Status::MissingScopes { .. } => "missing_scopes",
            Status::RefreshFailing { .. } => "refresh_failing",
            Status::ConsentRequired => "consent_required",
            Status::NotConnected => "not_connected",
        }
    }

    /// Every [`Status::code`], for the documents that list them.
    pub const CODES: [&'static str; 7] = [
        "ready",
        "needs_reconsent",
        "revoked",
        "missing_scopes",
        "refresh_failing",
        "consent_required",
        "not_connected",
    ];

    /// Only connecting again (through the provider) helps.
    pub fn needs_reconnect(&self) -> bool {
        matches!(self, Status::NeedsReconsent { .. } | Status::Revoked)
    }

    /// Why the last refresh failed, when one did.
    pub fn last_error(&self) -> Option<RefreshFailure> {
        match self {
            Status::RefreshFailing { error, .. } => Some(*error),
            Status::NeedsReconsent { why } => *why,
            Status::Revoked => Some(RefreshFailure::InvalidGrant),
            _ => None,
        }
    }

    /// When the next refresh may be tried, while one is held back.
    pub fn retry_at(&self) -> Option<Timestamp> {
        match self {
            Status::RefreshFailing { retry_at, .. } => *retry_at,
            _ => None,
        }
    }

    /// The coarse three-way status `list_connections` has always shown (`connected`,
    /// `needs_reconsent`, `not_connected`), kept for its readers.
    pub fn coarse(&self) -> ConnectionStatus {
        match self {
            Status::NotConnected => ConnectionStatus::NotConnected,
            Status::NeedsReconsent { .. } | Status::Revoked => ConnectionStatus::NeedsReconsent,
            _ => ConnectionStatus::Connected,
        }
    }

    /// A sentence for a person (pages, admin views): what it means and what to do.
    pub fn describe(&self) -> String {
        match self {
            Status::Ready => "connected".into(),
            Status::NeedsReconsent { why: Some(RefreshFailure::NoRefreshToken) } => {
                "expired; connect again to renew it".into()
            }
            Status::NeedsReconsent { .. } => "needs a new consent; connect again".into(),
            Status::Revoked => "revoked at the provider; connect again".into(),
            Status::MissingScopes { missing } => format!("lacks {}", missing.to_space_separated()),
            Status::RefreshFailing { error, .. } => format!("refresh failing ({})", error.as_str()),
            Status::ConsentRequired => "not allowed for this client yet".into(),
            Status::NotConnected => "not connected".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::grants::RefreshGate;

    fn grant(status: GrantStatus, scopes: &[&str], gate: RefreshGate) -> GrantRow {
        GrantRow {
            id: "g".into(),
            user_id: "u".into(),
            provider: "demo".into(),
            account_label: None,
            scopes: Scopes::parse(scopes.iter().copied()).unwrap(),
            access_token_sealed: vec![],
            refresh_token_sealed: Some(vec![1]),
            key_id: "k".into(),
            expires_at: Some(100),
            issued_at: Some(0),
            status,
            version: 1,
            refresh_lease_until: None,
            refresh_gate: gate,
            created_at: 0,
            updated_at: 0,
            organization: crate::domain::OrganizationId::default_organization(),
            app_id: None,
        }
    }

    fn failing(error: RefreshFailure, not_before: Option<i64>) -> RefreshGate {
        RefreshGate { last_error: Some(error), not_before, failures: 2, ..RefreshGate::default() }
    }

    #[test]
    fn no_grant_is_not_connected_and_a_healthy_one_is_ready() {
        let none = Scopes::default();
        assert_eq!(Status::of(None, 10, &none, None), Status::NotConnected);
        let ok = grant(GrantStatus::Active, &["read"], RefreshGate::default());
        assert_eq!(Status::of(Some(&ok), 10, &none, None), Status::Ready);
        assert_eq!(Status::of(Some(&ok), 10, &none, Some(true)), Status::Ready);
    }

    #[test]
    fn invalid_grant_reads_as_revoked_and_other_dead_grants_as_needing_consent() {
        let none = Scopes::default();
        let revoked = grant(GrantStatus::NeedsReconsent, &[], failing(RefreshFailure::InvalidGrant, None));
        assert_eq!(Status::of(Some(&revoked), 10, &none, Some(true)), Status::Revoked);
        let unreadable = grant(GrantStatus::NeedsReconsent, &[], failing(RefreshFailure::Unreadable, None));
        let status = Status::of(Some(&unreadable), 10, &none, None);
        assert_eq!(status, Status::NeedsReconsent { why: Some(RefreshFailure::Unreadable) });
        assert!(status.needs_reconnect() && Status::Revoked.needs_reconnect());
        // Rows marked before migration 0026 carry no reason.
        let old = grant(GrantStatus::NeedsReconsent, &[], RefreshGate::default());
        assert_eq!(Status::of(Some(&old), 10, &none, None), Status::NeedsReconsent { why: None });
        assert_eq!(Status::of(Some(&old), 10, &none, None).coarse(), ConnectionStatus::NeedsReconsent);
    }

    #[test]
    fn missing_scopes_are_relative_to_what_the_caller_requires() {
        let g = grant(GrantStatus::Active, &["read"], RefreshGate::default());
        let required = Scopes::parse(["read", "write"]).unwrap();
        let missing = Scopes::parse(["write"]).unwrap();
        assert_eq!(Status::of(Some(&g), 10, &required, Some(true)), Status::MissingScopes { missing });
        assert_eq!(Status::of(Some(&g), 10, &Scopes::parse(["read"]).unwrap(), None), Status::Ready);
    }

    #[test]
    fn a_failing_refresh_says_its_kind_and_when_the_next_try_is_due() {
        let none = Scopes::default();
        let g = grant(GrantStatus::Active, &[], failing(RefreshFailure::RateLimited, Some(40)));
        let status = Status::of(Some(&g), 10, &none, None);
        assert_eq!(
            status,
            Status::RefreshFailing { error: RefreshFailure::RateLimited, failures: 2, retry_at: Some(40) }
        );
        assert_eq!(
            (status.last_error(), status.retry_at(), status.coarse()),
            (Some(RefreshFailure::RateLimited), Some(40), ConnectionStatus::Connected)
        );
        // A backoff that has passed: the next use tries again.
        assert_eq!(Status::of(Some(&g), 50, &none, None).retry_at(), None);
    }

    #[test]
    fn a_client_not_allowed_yet_is_told_so_and_every_code_is_listed() {
        let g = grant(GrantStatus::Active, &[], RefreshGate::default());
        let status = Status::of(Some(&g), 10, &Scopes::default(), Some(false));
        assert_eq!(status, Status::ConsentRequired);
        for s in [Status::Ready, Status::Revoked, Status::NotConnected, status] {
            assert!(Status::CODES.contains(&s.code()));
        }
    }
}
