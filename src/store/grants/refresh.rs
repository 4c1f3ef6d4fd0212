//! A grant's refresh: the lease that lets one caller (on any instance) call the provider while
//! the others wait and re-read, the gate that holds refreshes back after failures, and storing
//! what a refresh brought. Every statement is a compare-and-swap on the row's `version` (or on
//! the refresh token redeemed) that returns the row's `user_id`, so only that user's caches
//! move, and a claim that lost moves nothing.

use crate::clock::Timestamp;
use crate::store::grants::refresh_failure::RefreshFailure;
use crate::store::grants::row::Grants;
use crate::store::grants::row::{GRANT_COLUMNS, GrantRow, REFRESH_WINDOW_SECONDS, RawGrantRow, SealedTokens};
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn, ReturnedUser};
use crate::store::machinery::counts::COUNT_CAP;
use crate::store::machinery::counts::Count;
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::write::{On, Write, Written};

/// A refresh lease as its holder knows it: the grant, the version the holder expects the row at
/// (the one its claim produced, for all but the claim), and the holder (a running process).
#[derive(Debug, Clone, Copy)]
pub struct Lease<'a> {
    pub grant_id: &'a str,
    pub version: i64,
    pub holder: &'a str,
}

/// [`Grants::record_refresh_failure`]: true when this holder still held the lease.
pub struct RecordRefreshFailure<'a> {
    lease: Lease<'a>,
    not_before: Timestamp,
    kind: RefreshFailure,
}

impl Write for RecordRefreshFailure<'_> {
    type Done = bool;

    async fn run(&self, on: On<'_, '_>) -> StoreResult<bool> {
        let failure = sqlx::query_as::<_, ReturnedUser>(
            "UPDATE grants SET refresh_lease_until = NULL, refresh_lease_holder = NULL, refresh_not_before = $1, \
             refresh_failures = refresh_failures + 1, refresh_error = $5 WHERE id = $2 AND version = $3 AND refresh_lease_holder = $4 \
             RETURNING user_id",
        )
        .bind(self.not_before)
        .bind(self.lease.grant_id)
        .bind(self.lease.version)
        .bind(self.lease.holder)
        .bind(self.kind.as_str());
        Ok(on.fetch_naming_user(failure).await?.is_some())
    }

    fn applied(done: &bool) -> bool {
        *done
    }
}

/// [`Grants::store_refreshed_tokens`]: the row as it now is, `None` when it no longer held the
/// refresh token redeemed.
pub struct StoreRefreshedTokens<'a> {
    grant_id: &'a str,
    redeemed: &'a [u8],
    tokens: &'a SealedTokens,
    now: Timestamp,
}

impl Write for StoreRefreshedTokens<'_> {
    type Done = Option<GrantRow>;

    async fn run(&self, on: On<'_, '_>) -> StoreResult<Option<GrantRow>> {
        let sql = format!(
            "UPDATE grants SET access_token_sealed = $1, refresh_token_sealed = $2, key_id = $3, expires_at = $4, scopes = $5, \
             issued_at = $6, status = 'active', version = version + 1, refresh_lease_until = NULL, refresh_lease_holder = NULL, \
             refresh_not_before = NULL, refresh_failures = 0, refresh_error = NULL, updated_at = $6 WHERE id = $7 AND refresh_token_sealed = $8 RETURNING {GRANT_COLUMNS}"
        );
        let stored = sqlx::query_as::<_, RawGrantRow>(&sql)
            .bind(&self.tokens.access_token_sealed)
            .bind(&self.tokens.refresh_token_sealed)
            .bind(&self.tokens.key_id)
            .bind(self.tokens.expires_at)
            .bind(self.tokens.scopes.to_space_separated())
            .bind(self.now)
            .bind(self.grant_id)
            .bind(self.redeemed);
        on.fetch_naming_user(stored).await?.map(GrantRow::try_from).transpose()
    }

    fn applied(done: &Option<GrantRow>) -> bool {
        done.is_some()
    }
}

impl<'s> Grants<'s> {
    /// Takes the refresh lease for its holder (a running process) if the row is still at the
    /// lease's version and nobody holds a live one, or the holder itself left it behind (its
    /// caller makes sure no refresh of its own is running). True when this caller won; the row is
    /// then at `version + 1`, which only the winner knows to expect when it renews or releases
    /// the lease (so a lease that lapsed and was taken over cannot be renewed or released by its
    /// first holder).
    ///
    /// The same statement enforces the [`RefreshGate`](crate::store::grants::RefreshGate): no claim
    /// before `refresh_not_before`, nor beyond `cap` attempts in the current one-minute window, and
    /// a won claim counts one attempt — in one conditional UPDATE, so two instances cannot both
    /// pass the cap.
    pub async fn claim_lease(
        self,
        lease: &Lease<'_>,
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
        .bind(lease.holder)
        .bind(lease.grant_id)
        .bind(lease.version)
        .bind(now)
        .bind(now - REFRESH_WINDOW_SECONDS)
        .bind(cap);
        Ok(self.store.write_returning_user().fetch_optional(claim).await?.is_some())
    }

    /// Releases the lease after a transient failure and holds the next refresh back until
    /// `not_before`, counting the failure (the backoff's exponent) and noting its kind. Only
    /// while this holder still holds the lease (at the version its claim produced): true then.
    pub fn record_refresh_failure(
        self,
        lease: &Lease<'s>,
        not_before: Timestamp,
        kind: RefreshFailure,
    ) -> Written<'s, RecordRefreshFailure<'s>> {
        Written::new(self.store, RecordRefreshFailure { lease: *lease, not_before, kind })
    }

    /// Extends a lease this holder still holds (at the version its claim produced). False when
    /// it no longer does.
    pub async fn renew_lease(self, lease: &Lease<'_>, lease_until: Timestamp) -> StoreResult<bool> {
        let renewal = sqlx::query_as::<_, ReturnedUser>(
            "UPDATE grants SET refresh_lease_until = $1 WHERE id = $2 AND version = $3 AND refresh_lease_holder = $4 \
             RETURNING user_id",
        )
        .bind(lease_until)
        .bind(lease.grant_id)
        .bind(lease.version)
        .bind(lease.holder);
        Ok(self.store.write_returning_user().fetch_optional(renewal).await?.is_some())
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
    pub fn store_refreshed_tokens(
        self,
        grant_id: &'s str,
        redeemed: &'s [u8],
        tokens: &'s SealedTokens,
        now: Timestamp,
    ) -> Written<'s, StoreRefreshedTokens<'s>> {
        Written::new(self.store, StoreRefreshedTokens { grant_id, redeemed, tokens, now })
    }

    /// Releases a lease without changing tokens (the refresh failed, or never started), if
    /// this holder still holds it.
    pub async fn release_lease(self, lease: &Lease<'_>) -> StoreResult<()> {
        let release = sqlx::query_as::<_, ReturnedUser>(
            "UPDATE grants SET refresh_lease_until = NULL, refresh_lease_holder = NULL \
             WHERE id = $1 AND version = $2 AND refresh_lease_holder = $3 RETURNING user_id",
        )
        .bind(lease.grant_id)
        .bind(lease.version)
        .bind(lease.holder);
        self.store.write_returning_user().fetch_optional(release).await?;
        Ok(())
    }

    /// Releases the lease after the provider refused the refresh (not transiently, not
    /// `invalid_grant`), noting it: the grant stays active, and the faces say its refresh fails.
    pub async fn record_refresh_refusal(self, lease: &Lease<'_>) -> StoreResult<()> {
        let release = sqlx::query_as::<_, ReturnedUser>(
            "UPDATE grants SET refresh_lease_until = NULL, refresh_lease_holder = NULL, refresh_error = $4 \
             WHERE id = $1 AND version = $2 AND refresh_lease_holder = $3 RETURNING user_id",
        )
        .bind(lease.grant_id)
        .bind(lease.version)
        .bind(lease.holder)
        .bind(RefreshFailure::Refused.as_str());
        self.store.write_returning_user().fetch_optional(release).await?;
        Ok(())
    }

    /// Releases every lease `holder` still holds; for a process that stops with refreshes
    /// unfinished (their answers are lost with it), so others need not wait for the leases to
    /// lapse. How many there were.
    pub async fn release_leases_of(self, holder: &str) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE grants SET refresh_lease_until = NULL, refresh_lease_holder = NULL WHERE refresh_lease_holder = $1",
        )
        .bind(holder)
        // Any number of users' grants, at shutdown.
        .execute(self.store.write(CacheEffect::Everyone))
        .await?;
        Ok(done.rows_affected())
    }

    /// The provider's grants whose next refresh is held back past `now` by a backoff: exact up
    /// to [`COUNT_CAP`] (the partial index `grants_backoff` holds only grants with a backoff).
    pub async fn in_backoff(self, provider: &str, now: Timestamp) -> StoreResult<Count> {
        let (n,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM (SELECT 1 FROM grants WHERE provider = $1 AND refresh_not_before > $2 LIMIT $3) capped",
        )
        .bind(provider)
        .bind(now)
        .bind(COUNT_CAP + 1)
        .fetch_one_in(self.store.read())
        .await?;
        Ok(if n <= COUNT_CAP { Count::Exact(n) } else { Count::AtLeast(COUNT_CAP) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Scopes;
    use crate::store::grants::NewGrant;
    use crate::store::grants::row::RefreshGate;
    use crate::store::machinery::store::Store;
    use crate::store::migrated_for_tests;

    async fn store_with_user() -> (tempfile::TempDir, Store, String) {
        let (dir, store) = migrated_for_tests().await;
        let user = store.users().create_local("http://issuer", "alice", "hash", 1).await.unwrap();
        (dir, store, user.id)
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
        let claim = |now: i64| {
            let store = store.clone();
            let id = id.clone();
            async move {
                let version = store.grants().by_id(&id).await.unwrap().unwrap().version;
                let won = store
                    .grants()
                    .claim_lease(&Lease { grant_id: &id, version, holder: "h" }, now, now + 10, 2)
                    .await
                    .unwrap();
                if won {
                    store
                        .grants()
                        .release_lease(&Lease { grant_id: &id, version: version + 1, holder: "h" })
                        .await
                        .unwrap();
                }
                won
            }
        };
        // Two attempts in the minute from t=100; the third waits for the window to pass.
        assert!(claim(100).await && claim(130).await);
        let gate = store.grants().by_id(&id).await.unwrap().unwrap().refresh_gate;
        assert_eq!((gate.window_start, gate.window_count), (Some(100), 2));
        assert_eq!(gate.wait(159, 2), Some(1), "capped until the window ends");
        assert!(!claim(159).await, "a third attempt within the minute is refused");
        assert!(claim(160).await, "a new window");
        assert_eq!(store.grants().by_id(&id).await.unwrap().unwrap().refresh_gate.window_count, 1);

        // A transient failure holds the next claim back until not_before, on any holder.
        let version = store.grants().by_id(&id).await.unwrap().unwrap().version;
        assert!(store.grants().claim_lease(&Lease { grant_id: &id, version, holder: "h" }, 230, 240, 2).await.unwrap());
        store
            .grants()
            .record_refresh_failure(
                &Lease { grant_id: &id, version: version + 1, holder: "h" },
                260,
                RefreshFailure::Timeout,
            )
            .await
            .unwrap();
        let gate = store.grants().by_id(&id).await.unwrap().unwrap().refresh_gate;
        assert_eq!((gate.not_before, gate.failures, gate.wait(250, 2)), (Some(260), 1, Some(10)));
        assert!(!claim(259).await, "backing off");
        assert!(claim(260).await, "after the backoff");

        // A new consent starts clean.
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
                    300
                )
                .await
                .unwrap()
        );
        assert_eq!(store.grants().by_id(&id).await.unwrap().unwrap().refresh_gate, RefreshGate::default());
    }
}
