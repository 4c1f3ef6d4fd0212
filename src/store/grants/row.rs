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
use crate::domain::Scopes;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn, NamesUser, ReturnedUser};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::paging::{Cursor, ListSql, Paged, Search, Window};
use crate::store::machinery::placeholders::numbered_values;
use crate::store::machinery::search::{Indexed, TextIndex, Via};
use crate::store::machinery::store::Store;
use crate::store::users::accounts::BY_USER_NAME;

use crate::store::grants::refresh_failure::RefreshFailure;

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
    /// when it may go ahead. [`Store::claim_refresh_lease`] applies the same conditions in SQL.
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
    id: String,
    user_id: String,
    provider: String,
    account_label: Option<String>,
    scopes: String,
    access_token_sealed: Vec<u8>,
    refresh_token_sealed: Option<Vec<u8>>,
    key_id: String,
    expires_at: Option<i64>,
    issued_at: Option<i64>,
    status: String,
    version: i64,
    refresh_lease_until: Option<i64>,
    refresh_not_before: Option<i64>,
    refresh_failures: i64,
    refresh_window_start: Option<i64>,
    refresh_window_count: i64,
    refresh_error: Option<String>,
    created_at: i64,
    updated_at: i64,
}

/// A write that returns the whole row moves its user's caches ([`Store::store_refreshed_tokens`]).
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
            .finish_non_exhaustive()
    }
}

/// '' in the column (no name) reads as NULL, so callers see `None`.
pub(in crate::store) const GRANT_COLUMNS: &str = "id, user_id, provider, NULLIF(account_label, '') AS account_label, scopes, access_token_sealed, refresh_token_sealed, key_id, expires_at, issued_at, status, version, refresh_lease_until, refresh_not_before, refresh_failures, refresh_window_start, refresh_window_count, refresh_error, created_at, updated_at";

/// Shared with [`crate::store::grants::events`], which runs the same statements beside an event.
pub(in crate::store) const UPSERT_GRANT: &str = "INSERT INTO grants (id, user_id, provider, account_label, scopes, access_token_sealed, refresh_token_sealed, key_id, expires_at, issued_at, status, version, refresh_lease_until, refresh_lease_holder, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'active', 1, NULL, NULL, $10, $10) \
             ON CONFLICT (user_id, provider, account_label) DO UPDATE SET scopes = excluded.scopes, \
             access_token_sealed = excluded.access_token_sealed, refresh_token_sealed = excluded.refresh_token_sealed, key_id = excluded.key_id, \
             expires_at = excluded.expires_at, issued_at = excluded.issued_at, status = 'active', version = grants.version + 1, \
             refresh_lease_until = NULL, refresh_lease_holder = NULL, refresh_not_before = NULL, refresh_failures = 0, \
             refresh_window_start = NULL, refresh_window_count = 0, refresh_error = NULL, updated_at = excluded.updated_at \
             WHERE grants.id = excluded.id";
pub(in crate::store) const RECORD_REFRESH_FAILURE: &str = "UPDATE grants SET refresh_lease_until = NULL, refresh_lease_holder = NULL, refresh_not_before = $1, \
             refresh_failures = refresh_failures + 1, refresh_error = $5 WHERE id = $2 AND version = $3 AND refresh_lease_holder = $4 \
             RETURNING user_id";
pub(in crate::store) const SET_GRANT_STATUS: &str = "UPDATE grants SET status = $1, version = version + 1, refresh_lease_until = NULL, refresh_lease_holder = NULL, updated_at = $2, \
             refresh_error = $5 WHERE id = $3 AND version = $4 RETURNING user_id";
pub(in crate::store) const DELETE_GRANT_BY_ID: &str = "DELETE FROM grants WHERE id = $1 RETURNING user_id";
/// `format!` with [`GRANT_COLUMNS`].
pub(in crate::store) fn store_refreshed_tokens_sql() -> String {
    format!(
        "UPDATE grants SET access_token_sealed = $1, refresh_token_sealed = $2, key_id = $3, expires_at = $4, scopes = $5, \
         issued_at = $6, status = 'active', version = version + 1, refresh_lease_until = NULL, refresh_lease_holder = NULL, \
         refresh_not_before = NULL, refresh_failures = 0, refresh_error = NULL, updated_at = $6 WHERE id = $7 AND refresh_token_sealed = $8 RETURNING {GRANT_COLUMNS}"
    )
}

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

impl Store {
    /// The user's grant at `provider`; with several accounts there, the most recently updated.
    /// Tools that must act on one account use [`Store::grant_for_account`].
    pub async fn grant(&self, user_id: &str, provider: &str) -> StoreResult<Option<GrantRow>> {
        sqlx::query_as::<_, RawGrantRow>(&format!(
            "SELECT {GRANT_COLUMNS} FROM grants WHERE user_id = $1 AND provider = $2 ORDER BY updated_at DESC, version DESC, id LIMIT 1"
        ))
        .bind(user_id)
        .bind(provider).fetch_optional_in(self.read())
        .await?
        .map(GrantRow::try_from)
        .transpose()
    }

    /// The grant for one account (`account` '' = the account without a name).
    pub async fn grant_for_account(
        &self,
        user_id: &str,
        provider: &str,
        account: &str,
    ) -> StoreResult<Option<GrantRow>> {
        sqlx::query_as::<_, RawGrantRow>(&format!(
            "SELECT {GRANT_COLUMNS} FROM grants WHERE user_id = $1 AND provider = $2 AND account_label = $3"
        ))
        .bind(user_id)
        .bind(provider)
        .bind(account)
        .fetch_optional_in(self.read())
        .await?
        .map(GrantRow::try_from)
        .transpose()
    }

    pub async fn grant_by_id(&self, id: &str) -> StoreResult<Option<GrantRow>> {
        sqlx::query_as::<_, RawGrantRow>(&format!("SELECT {GRANT_COLUMNS} FROM grants WHERE id = $1"))
            .bind(id)
            .fetch_optional_in(self.read())
            .await?
            .map(GrantRow::try_from)
            .transpose()
    }

    /// The grants with these ids (those that exist), for a list that names them.
    pub async fn grants_by_ids(&self, ids: &[&str]) -> StoreResult<Vec<GrantRow>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!("SELECT {GRANT_COLUMNS} FROM grants WHERE id IN ({})", numbered_values(ids.len()));
        let mut query = sqlx::query_as::<_, RawGrantRow>(&sql);
        for id in ids {
            query = query.bind(*id);
        }
        query.fetch_all_in(self.read()).await?.into_iter().map(GrantRow::try_from).collect()
    }

    /// Every account the user holds at `provider`, by account name.
    pub async fn grants_at(&self, user_id: &str, provider: &str) -> StoreResult<Vec<GrantRow>> {
        sqlx::query_as::<_, RawGrantRow>(&format!(
            "SELECT {GRANT_COLUMNS} FROM grants WHERE user_id = $1 AND provider = $2 ORDER BY account_label"
        ))
        .bind(user_id)
        .bind(provider)
        .fetch_all_in(self.read())
        .await?
        .into_iter()
        .map(GrantRow::try_from)
        .collect()
    }

    pub async fn grants_for_user(&self, user_id: &str) -> StoreResult<Vec<GrantRow>> {
        sqlx::query_as::<_, RawGrantRow>(&format!(
            "SELECT {GRANT_COLUMNS} FROM grants WHERE user_id = $1 ORDER BY provider, account_label"
        ))
        .bind(user_id)
        .fetch_all_in(self.read())
        .await?
        .into_iter()
        .map(GrantRow::try_from)
        .collect()
    }

    pub async fn all_grants(&self) -> StoreResult<Vec<GrantRow>> {
        sqlx::query_as::<_, RawGrantRow>(&format!(
            "SELECT {GRANT_COLUMNS} FROM grants ORDER BY user_id, provider, account_label"
        ))
        .fetch_all_in(self.read())
        .await?
        .into_iter()
        .map(GrantRow::try_from)
        .collect()
    }

    /// Inserts the grant for (user, provider, account) or replaces its tokens, in one statement
    /// so two completions racing cannot leave two rows. `id` is the id the sealed values were
    /// bound to: the existing row's, or [`Store::grant_id_for`] for a new account. The update
    /// only applies to a row with that id; false means the row changed identity meanwhile
    /// (disconnected and connected again), and the caller must seal again for the new id.
    pub async fn upsert_grant(
        &self,
        id: &str,
        user_id: &str,
        provider: &str,
        account_label: Option<&str>,
        tokens: &SealedTokens,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let done = sqlx::query(UPSERT_GRANT)
            .bind(id)
            .bind(user_id)
            .bind(provider)
            .bind(account_label.unwrap_or(""))
            .bind(tokens.scopes.to_space_separated())
            .bind(&tokens.access_token_sealed)
            .bind(&tokens.refresh_token_sealed)
            .bind(&tokens.key_id)
            .bind(tokens.expires_at)
            .bind(now)
            .execute(self.write(CacheEffect::User(user_id)))
            .await
            .map_err(StoreError::from_write)?;
        Ok(done.rows_affected() == 1)
    }

    /// The id for a new grant of (user, provider, account). Sealed values are bound to the
    /// grant id, so it must be known before sealing; deriving it from the key (rather than
    /// picking a random one) means two first connections racing seal for the same id, whichever
    /// row wins. Rows from before several accounts were allowed keep their ids,
    /// sha256(user\0provider): the input here has one more NUL-separated part, so the two never
    /// meet, and a reconnect finds the existing row (and its id) by its key first.
    pub fn grant_id_for(user_id: &str, provider: &str, account: &str) -> String {
        let digest = crate::crypto::sha256_hex(&format!("{user_id}\0{provider}\0{account}"));
        format!("g_{}", &digest[..32])
    }

    /// Takes the refresh lease for `holder` (a running process) if nobody holds a live one, or
    /// if `holder` itself left it behind (its caller makes sure no refresh of its own is running).
    /// True when this caller won; the row is then at `version + 1`, which only the winner knows
    /// to expect when it renews or releases the lease (so a lease that lapsed and was taken over
    /// cannot be renewed or released by its first holder).
    ///
    /// The same statement enforces the [`RefreshGate`]: no claim before `refresh_not_before`, nor
    /// beyond `cap` attempts in the current one-minute window, and a won claim counts one
    /// attempt — in one conditional UPDATE, so two instances cannot both pass the cap.
    #[allow(clippy::too_many_arguments)]
    pub async fn claim_refresh_lease(
        &self,
        grant_id: &str,
        version: i64,
        holder: &str,
        now: Timestamp,
        lease_until: Timestamp,
        cap: i64,
    ) -> StoreResult<bool> {
        let claim = sqlx::query_as::<_, ReturnedUser>(
            "UPDATE grants SET refresh_lease_until = $1, refresh_lease_holder = $2, version = version + 1, \
             refresh_window_count = CASE WHEN refresh_window_start IS NULL OR refresh_window_start <= $6 THEN 1 ELSE refresh_window_count + 1 END, \
             refresh_window_start = CASE WHEN refresh_window_start IS NULL OR refresh_window_start <= $6 THEN $5 ELSE refresh_window_start END \
             WHERE id = $3 AND version = $4 AND status = 'active' \
             AND (refresh_lease_until IS NULL OR refresh_lease_until <= $5 OR refresh_lease_holder = $2) \
             AND (refresh_not_before IS NULL OR refresh_not_before <= $5) \
             AND (refresh_window_start IS NULL OR refresh_window_start <= $6 OR refresh_window_count < $7) \
             RETURNING user_id",
        )
        .bind(lease_until)
        .bind(holder)
        .bind(grant_id)
        .bind(version)
        .bind(now)
        .bind(now - REFRESH_WINDOW_SECONDS)
        .bind(cap);
        Ok(self.write_returning_user().fetch_optional(claim).await?.is_some())
    }

    /// Releases the lease after a transient failure and holds the next refresh back until
    /// `not_before`, counting the failure (the backoff's exponent) and noting its kind. Only
    /// while this holder still holds the lease (at the version its claim produced).
    pub async fn record_refresh_failure(
        &self,
        grant_id: &str,
        version: i64,
        holder: &str,
        not_before: Timestamp,
        kind: RefreshFailure,
    ) -> StoreResult<()> {
        let failure = sqlx::query_as::<_, ReturnedUser>(RECORD_REFRESH_FAILURE)
            .bind(not_before)
            .bind(grant_id)
            .bind(version)
            .bind(holder)
            .bind(kind.as_str());
        self.write_returning_user().fetch_optional(failure).await?;
        Ok(())
    }

    /// Extends a lease this holder still holds (at the version its claim produced). False when
    /// it no longer does.
    pub async fn renew_refresh_lease(
        &self,
        grant_id: &str,
        version: i64,
        holder: &str,
        lease_until: Timestamp,
    ) -> StoreResult<bool> {
        let renewal = sqlx::query_as::<_, ReturnedUser>(
            "UPDATE grants SET refresh_lease_until = $1 WHERE id = $2 AND version = $3 AND refresh_lease_holder = $4 \
             RETURNING user_id",
        )
        .bind(lease_until)
        .bind(grant_id)
        .bind(version)
        .bind(holder);
        Ok(self.write_returning_user().fetch_optional(renewal).await?.is_some())
    }

    /// Stores the tokens a refresh of `redeemed` (the sealed refresh token sent to the provider)
    /// brought, releases the lease, and returns the row as it now is.
    ///
    /// The condition is the refresh token, not the lease: a provider that rotates has already
    /// invalidated `redeemed`, so its successor must be kept whenever `redeemed` is still the
    /// stored one — even if the lease lapsed meanwhile (a database outage outlasted it) or
    /// another instance, refreshing with `redeemed` after that, got `invalid_grant` and marked
    /// the grant for re-consent (the grant is active again). `None` when the row no longer holds
    /// `redeemed`: a new consent replaced it or it was deleted, and these tokens are moot.
    pub async fn store_refreshed_tokens(
        &self,
        grant_id: &str,
        redeemed: &[u8],
        tokens: &SealedTokens,
        now: Timestamp,
    ) -> StoreResult<Option<GrantRow>> {
        let sql = store_refreshed_tokens_sql();
        let stored = sqlx::query_as::<_, RawGrantRow>(&sql)
            .bind(&tokens.access_token_sealed)
            .bind(&tokens.refresh_token_sealed)
            .bind(&tokens.key_id)
            .bind(tokens.expires_at)
            .bind(tokens.scopes.to_space_separated())
            .bind(now)
            .bind(grant_id)
            .bind(redeemed);
        self.write_returning_user().fetch_optional(stored).await?.map(GrantRow::try_from).transpose()
    }

    /// Releases a lease without changing tokens (the refresh failed, or never started), if
    /// this holder still holds it.
    pub async fn release_refresh_lease(&self, grant_id: &str, version: i64, holder: &str) -> StoreResult<()> {
        let release = sqlx::query_as::<_, ReturnedUser>(
            "UPDATE grants SET refresh_lease_until = NULL, refresh_lease_holder = NULL \
             WHERE id = $1 AND version = $2 AND refresh_lease_holder = $3 RETURNING user_id",
        )
        .bind(grant_id)
        .bind(version)
        .bind(holder);
        self.write_returning_user().fetch_optional(release).await?;
        Ok(())
    }

    /// Releases the lease after the provider refused the refresh (not transiently, not
    /// `invalid_grant`), noting it: the grant stays active, and the faces say its refresh fails.
    pub async fn record_refresh_refusal(&self, grant_id: &str, version: i64, holder: &str) -> StoreResult<()> {
        let release = sqlx::query_as::<_, ReturnedUser>(
            "UPDATE grants SET refresh_lease_until = NULL, refresh_lease_holder = NULL, refresh_error = $4 \
             WHERE id = $1 AND version = $2 AND refresh_lease_holder = $3 RETURNING user_id",
        )
        .bind(grant_id)
        .bind(version)
        .bind(holder)
        .bind(RefreshFailure::Refused.as_str());
        self.write_returning_user().fetch_optional(release).await?;
        Ok(())
    }

    /// Releases every lease `holder` still holds; for a process that stops with refreshes
    /// unfinished (their answers are lost with it), so others need not wait for the leases to
    /// lapse. How many there were.
    pub async fn release_refresh_leases_of(&self, holder: &str) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE grants SET refresh_lease_until = NULL, refresh_lease_holder = NULL WHERE refresh_lease_holder = $1",
        )
        .bind(holder)
        // Any number of users' grants, at shutdown.
        .execute(self.write(CacheEffect::Everyone))
        .await?;
        Ok(done.rows_affected())
    }

    /// Changes the status if the row is still at `version` (a refresh that failed must not
    /// mark a grant that a new consent replaced meanwhile), noting why (`None` clears it).
    /// True if it changed.
    pub async fn set_grant_status(
        &self,
        grant_id: &str,
        version: i64,
        status: GrantStatus,
        why: Option<RefreshFailure>,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let change = sqlx::query_as::<_, ReturnedUser>(SET_GRANT_STATUS)
            .bind(status.as_str())
            .bind(now)
            .bind(grant_id)
            .bind(version)
            .bind(why.map(RefreshFailure::as_str));
        Ok(self.write_returning_user().fetch_optional(change).await?.is_some())
    }

    /// Deletes every account the user holds at `provider`. True if there was any.
    pub async fn delete_grant(&self, user_id: &str, provider: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM grants WHERE user_id = $1 AND provider = $2")
            .bind(user_id)
            .bind(provider)
            .execute(self.write(CacheEffect::User(user_id)))
            .await?;
        Ok(done.rows_affected() >= 1)
    }

    /// Deletes every user's grants at `provider` (an `mcp-oauth` server's authorization server
    /// was replaced: their tokens are of no use any more); how many there were.
    ///
    /// In statements of [`GRANTS_PER_DELETE`], each its own transaction: deleting a grant
    /// costs its triggers (search, counters, the access counter), and 50,000 grants in one
    /// statement held SQLite's only write lock for 3.5 s on a million-grant table — past the
    /// default `database_timeout` from about 70,000 grants, failing the command and making
    /// every serving instance's writes wait meanwhile. Between statements they write.
    pub async fn delete_grants_at(&self, provider: &str) -> StoreResult<u64> {
        let mut deleted = 0;
        loop {
            let done =
                sqlx::query("DELETE FROM grants WHERE id IN (SELECT id FROM grants WHERE provider = $1 LIMIT $2)")
                    .bind(provider)
                    .bind(GRANTS_PER_DELETE)
                    // Any number of users' grants.
                    .execute(self.write(CacheEffect::Everyone))
                    .await?;
            deleted += done.rows_affected();
            if done.rows_affected() < GRANTS_PER_DELETE as u64 {
                return Ok(deleted);
            }
        }
    }

    /// Deletes one grant. True if it was there.
    pub async fn delete_grant_by_id(&self, id: &str) -> StoreResult<bool> {
        let delete = sqlx::query_as::<_, ReturnedUser>(DELETE_GRANT_BY_ID).bind(id);
        Ok(self.write_returning_user().fetch_optional(delete).await?.is_some())
    }
}

/// What the grants list searches (consents also match by their grant's).
pub const GRANT_TEXT: TextIndex = TextIndex {
    table: "grants",
    text: "LOWER(provider || ' ' || COALESCE(account_label, '') || ' ' || status || ' ' || scopes || ' ' || id)",
    fts: "grants_search",
    column: "text",
    partial: None,
};

/// A row whose `grant_id` names a grant whose text holds the term matches.
pub const BY_GRANT_TEXT: Via = Via { index: GRANT_TEXT, column: "grant_id", prefix: 'g' };

impl Store {
    /// One page of grants matching `search`, newest first.
    pub async fn page_grants(&self, search: &Search, window: Window) -> StoreResult<Paged<GrantRow>> {
        // Provider, account, status, scopes, id, and the user's name (see `search`).
        let sql = ListSql {
            columns: GRANT_COLUMNS,
            from: "grants",
            filter: "",
            indexed: Some(Indexed { own: GRANT_TEXT, via: &[BY_USER_NAME], extra: Vec::new() }),
            chosen: None,
            order: "created_at DESC, id DESC",
            after: "(created_at, id) < ({k}, {i})",
        };
        let key = |g: &RawGrantRow| Cursor::new(g.created_at, g.id.clone());
        self.paged(sql, search, None, window, key).await?.try_map(GrantRow::try_from)
    }
}

/// Grants one statement of [`Store::delete_grants_at`] deletes: about 65 ms of SQLite's write
/// lock each (a million grants, found through `grants_provider`, migration 0036).
const GRANTS_PER_DELETE: i64 = 500;

#[cfg(test)]
mod tests {
    use super::*;

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
        }
    }

    async fn store_with_user() -> (tempfile::TempDir, Store, String) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}/t.db?mode=rwc", dir.path().display())).await.unwrap();
        store.migrate().await.unwrap();
        let user = store.create_local_user("http://issuer", "alice", "hash", 1).await.unwrap();
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
        let id = Store::grant_id_for(&user, "demo", "");
        assert!(store.upsert_grant(&id, &user, "demo", None, &tokens, 10).await.unwrap());

        let grant = store.grant(&user, "demo").await.unwrap().unwrap();
        assert_eq!((grant.status, &grant.scopes), (GrantStatus::Active, &tokens.scopes));
        let stored: (String, String) = sqlx::query_as("SELECT scopes, status FROM grants WHERE id = $1")
            .bind(&id)
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(stored, ("read:user repo".to_owned(), "active".to_owned()), "the column text is unchanged");

        assert!(
            store
                .set_grant_status(
                    &id,
                    grant.version,
                    GrantStatus::NeedsReconsent,
                    Some(RefreshFailure::InvalidGrant),
                    11
                )
                .await
                .unwrap()
        );
        assert_eq!(store.grant_by_id(&id).await.unwrap().unwrap().status, GrantStatus::NeedsReconsent);
    }

    #[tokio::test]
    async fn every_grant_at_a_provider_is_deleted_in_statements_of_a_bounded_size_and_no_other() {
        let (_dir, store, user) = store_with_user().await;
        let seed = |provider: &'static str, count: i64| {
            sqlx::query(
                "INSERT INTO grants (id, user_id, provider, account_label, scopes, access_token_sealed, key_id, \
                 status, version, created_at, updated_at, account_id) \
                 WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $3) \
                 SELECT $2 || i, $1, $2, 'acct' || i, 'read', x'01', 'k1', 'active', 1, 1, 1, 'a' || i FROM s",
            )
            .bind(user.clone())
            .bind(provider)
            .bind(count)
        };
        let moved = 2 * GRANTS_PER_DELETE + 7;
        seed("moved", moved).execute(store.pool()).await.unwrap();
        seed("kept", 3).execute(store.pool()).await.unwrap();

        let queries = store.queries_run();
        assert_eq!(store.delete_grants_at("moved").await.unwrap(), moved as u64, "counted over every statement");
        assert_eq!(store.queries_run() - queries, 3, "500, 500, then the last 7");
        let left: Vec<(String, i64)> = sqlx::query_as("SELECT provider, COUNT(*) FROM grants GROUP BY provider")
            .fetch_all(store.pool())
            .await
            .unwrap();
        assert_eq!(left, [("kept".to_owned(), 3)]);
        assert_eq!(store.delete_grants_at("moved").await.unwrap(), 0);
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
        let id = Store::grant_id_for(&user, "demo", "");
        assert!(store.upsert_grant(&id, &user, "demo", None, &tokens, 10).await.unwrap());
        sqlx::query("UPDATE grants SET status = 'paused' WHERE id = $1").bind(&id).execute(store.pool()).await.unwrap();

        assert!(matches!(store.grant_by_id(&id).await, Err(StoreError::Corrupt(_))));
        assert!(matches!(store.grants_for_user(&user).await, Err(StoreError::Corrupt(_))));
    }

    /// The cap and the backoff are enforced by the claim itself, the way a second instance
    /// meets them (the read-side [`RefreshGate::wait`] must agree).
    #[tokio::test]
    async fn the_claim_counts_attempts_per_minute_and_honours_the_backoff() {
        let (_dir, store, user) = store_with_user().await;
        let tokens = SealedTokens {
            access_token_sealed: vec![1],
            refresh_token_sealed: Some(vec![2]),
            key_id: "k1".into(),
            expires_at: Some(5),
            scopes: Scopes::default(),
        };
        let id = Store::grant_id_for(&user, "demo", "");
        assert!(store.upsert_grant(&id, &user, "demo", None, &tokens, 10).await.unwrap());
        let claim = |now: i64| {
            let store = store.clone();
            let id = id.clone();
            async move {
                let version = store.grant_by_id(&id).await.unwrap().unwrap().version;
                let won = store.claim_refresh_lease(&id, version, "h", now, now + 10, 2).await.unwrap();
                if won {
                    store.release_refresh_lease(&id, version + 1, "h").await.unwrap();
                }
                won
            }
        };
        // Two attempts in the minute from t=100; the third waits for the window to pass.
        assert!(claim(100).await && claim(130).await);
        let gate = store.grant_by_id(&id).await.unwrap().unwrap().refresh_gate;
        assert_eq!((gate.window_start, gate.window_count), (Some(100), 2));
        assert_eq!(gate.wait(159, 2), Some(1), "capped until the window ends");
        assert!(!claim(159).await, "a third attempt within the minute is refused");
        assert!(claim(160).await, "a new window");
        assert_eq!(store.grant_by_id(&id).await.unwrap().unwrap().refresh_gate.window_count, 1);

        // A transient failure holds the next claim back until not_before, on any holder.
        let version = store.grant_by_id(&id).await.unwrap().unwrap().version;
        assert!(store.claim_refresh_lease(&id, version, "h", 230, 240, 2).await.unwrap());
        store.record_refresh_failure(&id, version + 1, "h", 260, RefreshFailure::Timeout).await.unwrap();
        let gate = store.grant_by_id(&id).await.unwrap().unwrap().refresh_gate;
        assert_eq!((gate.not_before, gate.failures, gate.wait(250, 2)), (Some(260), 1, Some(10)));
        assert!(!claim(259).await, "backing off");
        assert!(claim(260).await, "after the backoff");

        // A new consent starts clean.
        assert!(store.upsert_grant(&id, &user, "demo", None, &tokens, 300).await.unwrap());
        assert_eq!(store.grant_by_id(&id).await.unwrap().unwrap().refresh_gate, RefreshGate::default());
    }
}
