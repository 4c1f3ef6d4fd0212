//! Storing, marking and deleting grants. The writes a service with a webhook hears of (a grant
//! stored, marked, deleted) are statement values ([`crate::store::machinery::write`]): each runs
//! alone, or in one transaction with its event.

use crate::clock::Timestamp;
use crate::domain::OrganizationId;
use crate::store::grants::refresh_failure::RefreshFailure;
use crate::store::grants::row::{GrantStatus, Grants, SealedTokens};
use crate::store::machinery::cache_effect::{CacheEffect, ReturnedUser};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::write::{On, Write, Written};

/// Grants one statement of [`Grants::delete_all_at`] deletes: about 65 ms of SQLite's write
/// lock each (a million grants, found through `grants_provider`, migration 0036).
const GRANTS_PER_DELETE: i64 = 500;

/// A grant to store: whose account at which provider, and its tokens, already sealed for `id`.
#[derive(Debug, Clone, Copy)]
pub struct NewGrant<'a> {
    /// The id the sealed values were bound to: the existing row's, or [`Grants::id_for`] for a
    /// new account.
    pub id: &'a str,
    pub user_id: &'a str,
    pub provider: &'a str,
    /// The provider's name for the account, `None` when it gave none.
    pub account_label: Option<&'a str>,
    pub tokens: &'a SealedTokens,
    /// The organization the connection was made in.
    pub organization: &'a OrganizationId,
    /// The organization's app version that issued the tokens; `None`: the operator's.
    pub app_id: Option<&'a str>,
}

/// [`Grants::upsert`]: true when it applied.
pub struct UpsertGrant<'a> {
    new: NewGrant<'a>,
    now: Timestamp,
}

impl Write for UpsertGrant<'_> {
    type Done = bool;

    async fn run(&self, on: On<'_, '_>) -> StoreResult<bool> {
        let new = &self.new;
        let upsert = sqlx::query(
            "INSERT INTO grants (id, user_id, provider, account_label, scopes, access_token_sealed, refresh_token_sealed, key_id, expires_at, issued_at, status, version, refresh_lease_until, refresh_lease_holder, created_at, updated_at, organization_id, app_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'active', 1, NULL, NULL, $10, $10, $11, $12) \
             ON CONFLICT (user_id, provider, account_label) DO UPDATE SET scopes = excluded.scopes, \
             access_token_sealed = excluded.access_token_sealed, refresh_token_sealed = excluded.refresh_token_sealed, key_id = excluded.key_id, \
             expires_at = excluded.expires_at, issued_at = excluded.issued_at, status = 'active', version = grants.version + 1, \
             refresh_lease_until = NULL, refresh_lease_holder = NULL, refresh_not_before = NULL, refresh_failures = 0, \
             refresh_window_start = NULL, refresh_window_count = 0, refresh_error = NULL, updated_at = excluded.updated_at, \
             organization_id = excluded.organization_id, app_id = excluded.app_id \
             WHERE grants.id = excluded.id",
        )
        .bind(new.id)
        .bind(new.user_id)
        .bind(new.provider)
        .bind(new.account_label.unwrap_or(""))
        .bind(new.tokens.scopes.to_space_separated())
        .bind(&new.tokens.access_token_sealed)
        .bind(&new.tokens.refresh_token_sealed)
        .bind(&new.tokens.key_id)
        .bind(new.tokens.expires_at)
        .bind(self.now)
        .bind(new.organization.as_str())
        .bind(new.app_id);
        let done = on.execute(CacheEffect::User(new.user_id), upsert).await.map_err(StoreError::from_write)?;
        Ok(done.rows_affected() == 1)
    }

    fn applied(done: &bool) -> bool {
        *done
    }
}

/// [`Grants::set_status`]: true when the status changed.
pub struct SetGrantStatus<'a> {
    grant_id: &'a str,
    version: i64,
    status: GrantStatus,
    why: Option<RefreshFailure>,
    now: Timestamp,
}

impl Write for SetGrantStatus<'_> {
    type Done = bool;

    async fn run(&self, on: On<'_, '_>) -> StoreResult<bool> {
        let change = sqlx::query_as::<_, ReturnedUser>(
            "UPDATE grants SET status = $1, version = version + 1, refresh_lease_until = NULL, refresh_lease_holder = NULL, updated_at = $2, \
             refresh_error = $5 WHERE id = $3 AND version = $4 RETURNING user_id",
        )
        .bind(self.status.as_str())
        .bind(self.now)
        .bind(self.grant_id)
        .bind(self.version)
        .bind(self.why.map(RefreshFailure::as_str));
        Ok(on.fetch_naming_user(change).await?.is_some())
    }

    fn applied(done: &bool) -> bool {
        *done
    }
}

/// [`Grants::delete`]: true when the grant was there.
pub struct DeleteGrant<'a> {
    id: &'a str,
}

impl Write for DeleteGrant<'_> {
    type Done = bool;

    async fn run(&self, on: On<'_, '_>) -> StoreResult<bool> {
        let delete =
            sqlx::query_as::<_, ReturnedUser>("DELETE FROM grants WHERE id = $1 RETURNING user_id").bind(self.id);
        Ok(on.fetch_naming_user(delete).await?.is_some())
    }

    fn applied(done: &bool) -> bool {
        *done
    }
}

impl<'s> Grants<'s> {
    /// Inserts the grant for (user, provider, account) or replaces its tokens, in one statement
    /// so two completions racing cannot leave two rows. The update only applies to a row with
    /// the id the sealed values were bound to ([`NewGrant::id`]); false means the row changed
    /// identity meanwhile (disconnected and connected again), and the caller must seal again for
    /// the new id.
    pub fn upsert(self, new: &NewGrant<'s>, now: Timestamp) -> Written<'s, UpsertGrant<'s>> {
        Written::new(self.store, UpsertGrant { new: *new, now })
    }

    /// The id for a new grant of (user, provider, account). Sealed values are bound to the
    /// grant id, so it must be known before sealing; deriving it from the key (rather than
    /// picking a random one) means two first connections racing seal for the same id, whichever
    /// row wins. Rows from before several accounts were allowed keep their ids,
    /// sha256(user\0provider): the input here has one more NUL-separated part, so the two never
    /// meet, and a reconnect finds the existing row (and its id) by its key first.
    pub fn id_for(user_id: &str, provider: &str, account: &str) -> String {
        let digest = crate::crypto::sha256_hex(&format!("{user_id}\0{provider}\0{account}"));
        format!("g_{}", &digest[..32])
    }

    /// Changes the status if the row is still at `version` (a refresh that failed must not
    /// mark a grant that a new consent replaced meanwhile), noting why (`None` clears it).
    /// True if it changed.
    pub fn set_status(
        self,
        grant_id: &'s str,
        version: i64,
        status: GrantStatus,
        why: Option<RefreshFailure>,
        now: Timestamp,
    ) -> Written<'s, SetGrantStatus<'s>> {
        Written::new(self.store, SetGrantStatus { grant_id, version, status, why, now })
    }

    /// Deletes every account the user holds at `provider`. True if there was any.
    pub async fn delete_at(self, user_id: &str, provider: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM grants WHERE user_id = $1 AND provider = $2")
            .bind(user_id)
            .bind(provider)
            .execute(self.store.write(CacheEffect::User(user_id)))
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
    pub async fn delete_all_at(self, provider: &str) -> StoreResult<u64> {
        let mut deleted = 0;
        loop {
            let done =
                sqlx::query("DELETE FROM grants WHERE id IN (SELECT id FROM grants WHERE provider = $1 LIMIT $2)")
                    .bind(provider)
                    .bind(GRANTS_PER_DELETE)
                    // Any number of users' grants.
                    .execute(self.store.write(CacheEffect::Everyone))
                    .await?;
            deleted += done.rows_affected();
            if done.rows_affected() < GRANTS_PER_DELETE as u64 {
                return Ok(deleted);
            }
        }
    }

    /// Deletes one grant. True if it was there.
    pub fn delete(self, id: &'s str) -> Written<'s, DeleteGrant<'s>> {
        Written::new(self.store, DeleteGrant { id })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::machinery::store::Store;
    use crate::store::migrated_for_tests;

    async fn store_with_user() -> (tempfile::TempDir, Store, String) {
        let (dir, store) = migrated_for_tests().await;
        let user = store.users().create_local("http://issuer", "alice", "hash", 1).await.unwrap();
        (dir, store, user.id)
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
        assert_eq!(store.grants().delete_all_at("moved").await.unwrap(), moved as u64, "counted over every statement");
        assert_eq!(store.queries_run() - queries, 3, "500, 500, then the last 7");
        let left: Vec<(String, i64)> = sqlx::query_as("SELECT provider, COUNT(*) FROM grants GROUP BY provider")
            .fetch_all(store.pool())
            .await
            .unwrap();
        assert_eq!(left, [("kept".to_owned(), 3)]);
        assert_eq!(store.grants().delete_all_at("moved").await.unwrap(), 0);
    }
}
