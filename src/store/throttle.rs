//! Rows of the sign-in throttle (`src/web/throttle.rs` decides; this stores), shared by
//! every instance on the database (migration 0010). Buckets are opaque keys the throttle
//! builds; they hold usernames and addresses, never a secret.

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::store::Store;

/// The longest window any budget counts rows of `throttle_failures` over (client
/// registrations: 10 minutes, `authorization_server::registration`); the sweep keeps rows
/// at least this long so no budget loses attempts it still counts.
pub const LONGEST_WINDOW_SECONDS: i64 = 10 * 60;

/// A bucket's lock as stored (it may have ended: `locked_until` in the past).
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct ThrottleLock {
    pub locked_until: Timestamp,
    /// Consecutive locks, for the doubling.
    pub strikes: i64,
}

impl Store {
    /// The bucket's lock, whether or not it has ended.
    pub async fn throttle_lock(&self, bucket: &str) -> StoreResult<Option<ThrottleLock>> {
        Ok(sqlx::query_as::<_, ThrottleLock>(
            "SELECT locked_until, CAST(strikes AS BIGINT) AS strikes FROM throttle_locks WHERE bucket = $1",
        )
        .bind(bucket)
        .fetch_optional_in(self.read())
        .await?)
    }

    /// Counts a failure in `bucket` at `now`; returns the bucket's failures after `since`
    /// (this one included), from every instance.
    pub async fn throttle_count_failure(&self, bucket: &str, now: Timestamp, since: Timestamp) -> StoreResult<i64> {
        sqlx::query("INSERT INTO throttle_failures (bucket, at) VALUES ($1, $2)")
            .bind(bucket)
            .bind(now)
            .execute(self.write(CacheEffect::Nothing))
            .await?;
        let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM throttle_failures WHERE bucket = $1 AND at > $2")
            .bind(bucket)
            .bind(since)
            .fetch_one_in(self.read())
            .await?;
        Ok(count)
    }

    /// Takes one attempt from `bucket`'s budget of `max` per window starting after `since`:
    /// `Ok(Ok(()))` and the attempt counted, or `Ok(Err(oldest))` with the time of the oldest
    /// attempt still in the window (the budget frees up when it leaves), nothing counted.
    /// Shared by every instance on the database; two instances racing at the very edge of a
    /// budget may both pass once, which a rate limit tolerates.
    pub async fn throttle_take(
        &self,
        bucket: &str,
        now: Timestamp,
        since: Timestamp,
        max: i64,
    ) -> StoreResult<Result<(), Timestamp>> {
        // The bucket's own expired rows go first, so a budget nobody signs in beside stays small.
        sqlx::query("DELETE FROM throttle_failures WHERE bucket = $1 AND at <= $2")
            .bind(bucket)
            .bind(since)
            .execute(self.write(CacheEffect::Nothing))
            .await?;
        let (count, oldest): (i64, Option<i64>) =
            sqlx::query_as("SELECT COUNT(*), MIN(at) FROM throttle_failures WHERE bucket = $1 AND at > $2")
                .bind(bucket)
                .bind(since)
                .fetch_one_in(self.read())
                .await?;
        if count >= max {
            return Ok(Err(oldest.unwrap_or(now)));
        }
        sqlx::query("INSERT INTO throttle_failures (bucket, at) VALUES ($1, $2)")
            .bind(bucket)
            .bind(now)
            .execute(self.write(CacheEffect::Nothing))
            .await?;
        Ok(Ok(()))
    }

    /// Locks `bucket` and forgets its counted failures (the lock replaces them).
    pub async fn throttle_set_lock(&self, bucket: &str, lock: ThrottleLock) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO throttle_locks (bucket, locked_until, strikes) VALUES ($1, $2, $3) \
             ON CONFLICT (bucket) DO UPDATE SET locked_until = excluded.locked_until, strikes = excluded.strikes",
        )
        .bind(bucket)
        .bind(lock.locked_until)
        .bind(lock.strikes)
        .execute(self.write(CacheEffect::Nothing))
        .await?;
        sqlx::query("DELETE FROM throttle_failures WHERE bucket = $1")
            .bind(bucket)
            .execute(self.write(CacheEffect::Nothing))
            .await?;
        Ok(())
    }

    /// Forgets a bucket's failures and lock.
    pub async fn throttle_clear(&self, bucket: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM throttle_failures WHERE bucket = $1")
            .bind(bucket)
            .execute(self.write(CacheEffect::Nothing))
            .await?;
        sqlx::query("DELETE FROM throttle_locks WHERE bucket = $1")
            .bind(bucket)
            .execute(self.write(CacheEffect::Nothing))
            .await?;
        Ok(())
    }

    /// Whether `address` signed in to `account` after `since`.
    pub async fn throttle_address_known(&self, account: &str, address: &str, since: Timestamp) -> StoreResult<bool> {
        let (count,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM throttle_known_addresses WHERE account = $1 AND address = $2 AND at > $3",
        )
        .bind(account)
        .bind(address)
        .bind(since)
        .fetch_one_in(self.read())
        .await?;
        Ok(count > 0)
    }

    /// Remembers that `address` signed in to `account` at `now`, keeping the `keep` most recent.
    pub async fn throttle_remember_address(
        &self,
        account: &str,
        address: &str,
        now: Timestamp,
        keep: i64,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO throttle_known_addresses (account, address, at) VALUES ($1, $2, $3) \
             ON CONFLICT (account, address) DO UPDATE SET at = excluded.at",
        )
        .bind(account)
        .bind(address)
        .bind(now)
        .execute(self.write(CacheEffect::Nothing))
        .await?;
        sqlx::query(
            "DELETE FROM throttle_known_addresses WHERE account = $1 AND address NOT IN \
             (SELECT address FROM throttle_known_addresses WHERE account = $1 ORDER BY at DESC, address LIMIT $2)",
        )
        .bind(account)
        .bind(keep)
        .execute(self.write(CacheEffect::Nothing))
        .await?;
        Ok(())
    }

    /// Deletes failures counted before `failures_before`, locks that ended before
    /// `locks_before` and addresses last seen before `addresses_before`.
    pub async fn throttle_sweep(
        &self,
        failures_before: Timestamp,
        locks_before: Timestamp,
        addresses_before: Timestamp,
    ) -> StoreResult<()> {
        sqlx::query("DELETE FROM throttle_failures WHERE at <= $1")
            .bind(failures_before)
            .execute(self.write(CacheEffect::Nothing))
            .await?;
        sqlx::query("DELETE FROM throttle_locks WHERE locked_until <= $1")
            .bind(locks_before)
            .execute(self.write(CacheEffect::Nothing))
            .await?;
        sqlx::query("DELETE FROM throttle_known_addresses WHERE at <= $1")
            .bind(addresses_before)
            .execute(self.write(CacheEffect::Nothing))
            .await?;
        Ok(())
    }
}
