//! Grants: a user's tokens for one account at one provider, sealed. A user may hold several
//! accounts at a provider, keyed by `(user_id, provider, account_label)`; the column stores ''
//! for an account the provider gave no name, and [`GrantRow::account_label`] reads it as `None`.
//! `version` makes every update a compare-and-swap, and the refresh lease
//! (`refresh_lease_until`, `refresh_lease_holder`) lets one caller (on any instance) refresh
//! while the others wait and re-read.
//!
//! Every write moves only its user's cache generation ([`crate::store::machinery::cache_effect`]):
//! a statement about one grant by id returns the row's `user_id` (`RETURNING`), so its callers need
//! not know the owner and nothing is looked up first; a claim that lost, or any statement that
//! matched no row, moves nothing.

use crate::clock::Timestamp;
use crate::domain::{OrganizationId, Scopes};
use crate::store::machinery::cache_effect::NamesUser;
use crate::store::machinery::error::StoreError;
use crate::store::machinery::store::Store;

use crate::store::grants::refresh_failure::RefreshFailure;

/// The handle on grants: `store.grants()`.
#[derive(Debug, Clone, Copy)]
pub struct Grants<'s> {
    pub(in crate::store) store: &'s Store,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantStatus {
    Active,
    /// The provider refused the refresh token (`invalid_grant`): only a new consent helps.
    NeedsReconsent,
}

impl GrantStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            GrantStatus::Active => "active",
            GrantStatus::NeedsReconsent => "needs_reconsent",
        }
    }

    /// The status stored as `value`, `None` for anything else.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "active" => Some(GrantStatus::Active),
            "needs_reconsent" => Some(GrantStatus::NeedsReconsent),
            _ => None,
        }
    }
}

impl std::fmt::Display for GrantStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, not `write_str`: the admin tables align these with `{:<16}`.
        f.pad(self.as_str())
    }
}

/// Serialises as the stored string, so JSON shows what it showed when the field was text.
impl serde::Serialize for GrantStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A grant as the rest of the broker sees it: status and scopes parsed once, here.
#[derive(Clone)]
pub struct GrantRow {
    pub id: String,
    pub user_id: String,
    pub provider: String,
    /// The provider's name for the account (from its userinfo), `None` when it gave none.
    pub account_label: Option<String>,
    /// Space separated in the column.
    pub scopes: Scopes,
    pub access_token_sealed: Vec<u8>,
    pub refresh_token_sealed: Option<Vec<u8>>,
    pub key_id: String,
    pub expires_at: Option<i64>,
    /// When the stored tokens were issued (`None` for rows from before it was recorded).
    pub issued_at: Option<i64>,
    pub status: GrantStatus,
    pub version: i64,
    pub refresh_lease_until: Option<i64>,
    /// Backoff and the per-minute attempt cap (migration 0013).
    pub refresh_gate: RefreshGate,
    pub created_at: i64,
    pub updated_at: i64,
    /// The organization the grant was made in (whose app issued it, whose services may use it).
    pub organization: OrganizationId,
    /// The organization's app version that issued the tokens ([`crate::store::organizations::ProviderApp`]);
    /// `None`: the operator's app. Refreshes, revocation and API calls use the same one.
    pub app_id: Option<String>,
}

/// What holds a grant's next refresh back (migration 0013): a backoff after transient
/// failures, and the count of attempts in the current one-minute window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RefreshGate {
    /// No refresh before this time (set after a transient failure, cleared on success).
    pub not_before: Option<Timestamp>,
    /// Transient failures in a row (the backoff's exponent), 0 after a success.
    pub failures: i64,
    /// When the current one-minute window of attempts began.
    pub window_start: Option<Timestamp>,
    /// Attempts at the provider since `window_start`.
    pub window_count: i64,
    /// Why the last refresh failed (migration 0026); `None` since the last success.
    pub last_error: Option<RefreshFailure>,
}

/// The window the per-minute attempt cap counts in.
pub const REFRESH_WINDOW_SECONDS: i64 = 60;

impl RefreshGate {
    /// How long a refresh must wait at `now` with at most `cap` attempts per window, `None`
    /// when it may go ahead. [`Grants::claim_lease`] applies the same conditions in SQL.
    pub fn wait(&self, now: Timestamp, cap: i64) -> Option<i64> {
        let backoff = self.not_before.map(|t| t - now).filter(|w| *w > 0);
        let capped = match self.window_start {
            Some(start) if start + REFRESH_WINDOW_SECONDS > now && self.window_count >= cap => {
                Some(start + REFRESH_WINDOW_SECONDS - now)
            }
            _ => None,
        };
        backoff.max(capped)
    }
}

/// The row as stored; read only through [`GrantRow::try_from`].
#[derive(sqlx::FromRow)]
pub(in crate::store) struct RawGrantRow {
    pub(super) id: String,
    pub(super) user_id: String,
    pub(super) provider: String,
    pub(super) account_label: Option<String>,
    pub(super) scopes: String,
    pub(super) access_token_sealed: Vec<u8>,
    pub(super) refresh_token_sealed: Option<Vec<u8>>,
    pub(super) key_id: String,
    pub(super) expires_at: Option<i64>,
    pub(super) issued_at: Option<i64>,
    pub(super) status: String,
    pub(super) version: i64,
    pub(super) refresh_lease_until: Option<i64>,
    pub(super) refresh_not_before: Option<i64>,
    pub(super) refresh_failures: i64,
    pub(super) refresh_window_start: Option<i64>,
    pub(super) refresh_window_count: i64,
    pub(super) refresh_error: Option<String>,
    pub(super) created_at: i64,
    pub(super) updated_at: i64,
    pub(super) organization_id: String,
    pub(super) app_id: Option<String>,
}

/// A write that returns the whole row moves its user's caches ([`Grants::store_refreshed_tokens`]).
impl NamesUser for RawGrantRow {
    fn user_id(&self) -> &str {
        &self.user_id
    }
}

impl TryFrom<RawGrantRow> for GrantRow {
    type Error = StoreError;

    fn try_from(raw: RawGrantRow) -> Result<Self, Self::Error> {
        let status = GrantStatus::parse(&raw.status)
            .ok_or_else(|| StoreError::Corrupt(format!("grant {:?} has unknown status {:?}", raw.id, raw.status)))?;
        let scopes = Scopes::from_space_separated(&raw.scopes)
            .map_err(|e| StoreError::Corrupt(format!("grant {:?}: {e}", raw.id)))?;
        let last_error = match raw.refresh_error.as_deref() {
            None => None,
            Some(stored) => Some(RefreshFailure::parse(stored).ok_or_else(|| {
                StoreError::Corrupt(format!("grant {:?} has unknown refresh error {stored:?}", raw.id))
            })?),
        };
        Ok(GrantRow {
            id: raw.id,
            user_id: raw.user_id,
            provider: raw.provider,
            account_label: raw.account_label,
            scopes,
            access_token_sealed: raw.access_token_sealed,
            refresh_token_sealed: raw.refresh_token_sealed,
            key_id: raw.key_id,
            expires_at: raw.expires_at,
            issued_at: raw.issued_at,
            status,
            version: raw.version,
            refresh_lease_until: raw.refresh_lease_until,
            refresh_gate: RefreshGate {
                not_before: raw.refresh_not_before,
                failures: raw.refresh_failures,
                window_start: raw.refresh_window_start,
                window_count: raw.refresh_window_count,
                last_error,
            },
            created_at: raw.created_at,
            updated_at: raw.updated_at,
            organization: OrganizationId::from_stored(raw.organization_id),
            app_id: raw.app_id,
        })
    }
}

impl std::fmt::Debug for GrantRow {
    // Sealed blobs are not secrets on their own, but they are noise in logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrantRow")
            .field("id", &self.id)
            .field("user_id", &self.user_id)
            .field("provider", &self.provider)
            .field("account_label", &self.account_label)
            .field("scopes", &self.scopes)
            .field("status", &self.status)
            .field("expires_at", &self.expires_at)
            .field("version", &self.version)
            .field("organization", &self.organization)
            .field("app_id", &self.app_id)
            .finish_non_exhaustive()
    }
}

/// '' in the column (no name) reads as NULL, so callers see `None`.
pub(in crate::store) const GRANT_COLUMNS: &str = "id, user_id, provider, NULLIF(account_label, '') AS account_label, scopes, access_token_sealed, refresh_token_sealed, key_id, expires_at, issued_at, status, version, refresh_lease_until, refresh_not_before, refresh_failures, refresh_window_start, refresh_window_count, refresh_error, created_at, updated_at, organization_id, app_id";

/// New token material for a grant (already sealed by the caller).
#[derive(Debug, Clone)]
pub struct SealedTokens {
    pub access_token_sealed: Vec<u8>,
    pub refresh_token_sealed: Option<Vec<u8>>,
    pub key_id: String,
    pub expires_at: Option<Timestamp>,
    /// Stored space separated.
    pub scopes: Scopes,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::grants::NewGrant;

    fn raw(status: &str, scopes: &str) -> RawGrantRow {
        RawGrantRow {
            id: "g1".into(),
            user_id: "u1".into(),
            provider: "demo".into(),
            account_label: None,
            scopes: scopes.into(),
            access_token_sealed: vec![1],
            refresh_token_sealed: None,
            key_id: "k1".into(),
            expires_at: None,
            issued_at: None,
            status: status.into(),
            version: 1,
            refresh_lease_until: None,
            refresh_not_before: None,
            refresh_failures: 0,
            refresh_window_start: None,
            refresh_window_count: 0,
            refresh_error: None,
            created_at: 1,
            updated_at: 1,
            organization_id: "org_default".into(),
            app_id: None,
        }
    }

    async fn store_with_user() -> (tempfile::TempDir, Store, String) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}/t.db?mode=rwc", dir.path().display())).await.unwrap();
        store.migrate().await.unwrap();
        let user = store.users().create_local("http://issuer", "alice", "hash", 1).await.unwrap();
        (dir, store, user.id)
    }

    #[test]
    fn a_stored_row_becomes_a_typed_grant() {
        let row = GrantRow::try_from(raw("needs_reconsent", "repo read:user")).unwrap();
        assert_eq!(row.status, GrantStatus::NeedsReconsent);
        assert_eq!(row.scopes, Scopes::parse(["read:user", "repo"]).unwrap());
    }

    #[test]
    fn an_unknown_status_or_a_malformed_scope_is_corrupt() {
        for bad in [raw("revoked", "repo"), raw("Active", "repo"), raw("active", "repo \"quoted\"")] {
            assert!(matches!(GrantRow::try_from(bad), Err(StoreError::Corrupt(_))));
        }
    }

    #[test]
    fn statuses_read_back_what_they_write() {
        for status in [GrantStatus::Active, GrantStatus::NeedsReconsent] {
            assert_eq!(GrantStatus::parse(status.as_str()), Some(status));
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
            assert_eq!(format!("{status:<16}|"), format!("{:<16}|", status.as_str()));
        }
    }

    #[tokio::test]
    async fn a_grant_round_trips_through_sqlite_as_typed_values() {
        let (_dir, store, user) = store_with_user().await;
        let tokens = SealedTokens {
            access_token_sealed: vec![1, 2],
            refresh_token_sealed: None,
            key_id: "k1".into(),
            expires_at: None,
            scopes: Scopes::parse(["repo", "read:user"]).unwrap(),
        };
        let id = Grants::id_for(&user, "demo", "");
        assert!(
            store
                .grants()
                .upsert(
                    &NewGrant {
                        id: &id,
                        user_id: &user,
                        provider: "demo",
                        account_label: None,
                        tokens: &tokens,
                        organization: &crate::domain::OrganizationId::default_organization(),
                        app_id: None
                    },
                    10
                )
                .await
                .unwrap()
        );

        let grant = store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
        assert_eq!((grant.status, &grant.scopes), (GrantStatus::Active, &tokens.scopes));
        let stored: (String, String) = sqlx::query_as("SELECT scopes, status FROM grants WHERE id = $1")
            .bind(&id)
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(stored, ("read:user repo".to_owned(), "active".to_owned()), "the column text is unchanged");

        assert!(
            store
                .grants()
                .set_status(&id, grant.version, GrantStatus::NeedsReconsent, Some(RefreshFailure::InvalidGrant), 11)
                .await
                .unwrap()
        );
        assert_eq!(store.grants().by_id(&id).await.unwrap().unwrap().status, GrantStatus::NeedsReconsent);
    }

    #[tokio::test]
    async fn a_row_holding_nonsense_is_reported_corrupt_not_guessed() {
        let (_dir, store, user) = store_with_user().await;
        let tokens = SealedTokens {
            access_token_sealed: vec![1],
            refresh_token_sealed: None,
            key_id: "k1".into(),
            expires_at: None,
            scopes: Scopes::default(),
        };
        let id = Grants::id_for(&user, "demo", "");
        assert!(
            store
                .grants()
                .upsert(
                    &NewGrant {
                        id: &id,
                        user_id: &user,
                        provider: "demo",
                        account_label: None,
                        tokens: &tokens,
                        organization: &crate::domain::OrganizationId::default_organization(),
                        app_id: None
                    },
                    10
                )
                .await
                .unwrap()
        );
        sqlx::query("UPDATE grants SET status = 'paused' WHERE id = $1").bind(&id).execute(store.pool()).await.unwrap();

        assert!(matches!(store.grants().by_id(&id).await, Err(StoreError::Corrupt(_))));
        assert!(matches!(store.grants().for_user(&user).await, Err(StoreError::Corrupt(_))));
    }
}
