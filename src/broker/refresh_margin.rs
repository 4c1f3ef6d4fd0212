//! The refresh margin: when a stored access token is due for a refresh, and when it still works.
//!
//! A token is refreshed within its *refresh margin* of expiring, so it does not expire in
//! flight: a tenth of its lifetime, at most `refresh_margin` (the provider's own setting, else
//! the global one; a minute by default). A fixed margin would make a token living less than it
//! stale from the moment it is issued, and every call would refresh it. Rows stored before the
//! issue time was recorded use the whole margin.
//!
//! Within the margin the token still works: when its refresh cannot run yet (backoff, the
//! attempt cap) or fails transiently, callers keep getting it until it really expires.

use super::core::Core;
use crate::config::ProviderConfig;
use crate::store::grants::GrantRow;

/// The longest margin for `provider`'s tokens, in seconds.
pub(super) fn max_margin(core: &Core, provider: &ProviderConfig) -> i64 {
    let margin = provider.refresh_margin.unwrap_or(core.config.refresh_margin);
    i64::try_from(margin.as_secs()).unwrap_or(i64::MAX / 4)
}

/// Usable for a while yet: not within its refresh margin of expiring.
pub(super) fn is_fresh(grant: &GrantRow, now: i64, max_margin: i64) -> bool {
    grant.expires_at.is_none_or(|exp| exp - expiry_margin(grant.issued_at, exp, max_margin) > now)
}

/// Not expired yet (it may be within its margin): the provider should still accept it.
pub(super) fn still_valid(grant: &GrantRow, now: i64) -> bool {
    grant.expires_at.is_none_or(|exp| exp > now)
}

/// How long before expiry a token counts as due: a tenth of its lifetime, at most `max`.
fn expiry_margin(issued_at: Option<i64>, expires_at: i64, max: i64) -> i64 {
    match issued_at {
        Some(issued) if expires_at > issued => ((expires_at - issued) / 10).min(max),
        _ => max,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Scopes;
    use crate::store::grants::GrantStatus;

    #[test]
    fn the_refresh_margin_is_a_tenth_of_the_lifetime_and_at_most_the_configured_maximum() {
        assert_eq!(expiry_margin(Some(1_000), 1_030, 60), 3, "a 30-second token");
        assert_eq!(expiry_margin(Some(1_000), 1_000 + 3600, 60), 60, "an hour-long token");
        assert_eq!(expiry_margin(Some(1_000), 1_000 + 3600, 300), 300, "a five-minute maximum");
        assert_eq!(expiry_margin(Some(1_000), 1_000 + 3600, 0), 0, "no margin: used until it expires");
        assert_eq!(expiry_margin(Some(1_000), 1_005, 60), 0, "a 5-second token is used until it expires");
        assert_eq!(expiry_margin(None, 1_030, 60), 60, "rows from before issued_at keep the maximum");
    }

    #[test]
    fn a_30_second_token_is_fresh_for_most_of_its_life_and_valid_until_it_expires() {
        let row = test_row(Some(1_000), Some(1_030));
        assert!(is_fresh(&row, 1_000, 60), "just issued");
        assert!(is_fresh(&row, 1_026, 60));
        assert!(!is_fresh(&row, 1_027, 60), "within 3 s of expiry");
        assert!(still_valid(&row, 1_029), "due, but it still works");
        assert!(!still_valid(&row, 1_030), "expired");
        assert!(still_valid(&test_row(None, None), i64::MAX), "a token without expiry");
    }

    fn test_row(issued_at: Option<i64>, expires_at: Option<i64>) -> GrantRow {
        GrantRow {
            id: "g".into(),
            user_id: "u".into(),
            provider: "demo".into(),
            account_label: None,
            scopes: Scopes::default(),
            access_token_sealed: Vec::new(),
            refresh_token_sealed: None,
            key_id: "k".into(),
            expires_at,
            issued_at,
            status: GrantStatus::Active,
            version: 1,
            refresh_lease_until: None,
            refresh_gate: Default::default(),
            created_at: 0,
            updated_at: 0,
            organization: crate::domain::OrganizationId::default_organization(),
            app_id: None,
        }
    }
}
