//! Rows of the sign-in throttle (`src/web/throttle.rs` decides; this stores), shared by every
//! instance on the database (migration 0010), and of the other budgets that count attempts in a
//! window the same way (client registrations, the MCP face's completions). Buckets are opaque keys
//! the throttle builds; they hold usernames and addresses, never a secret.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::store::Store;

/// The handle on the sign-in throttle: `store.throttle()`.
#[derive(Debug, Clone, Copy)]
pub struct Throttle<'s> {
    pub(in crate::store) store: &'s Store,
}

/// Every this many requests a process takes, it deletes the bucket's rows that left the window
/// (the statement that takes stays one statement on every other request).
const PRUNE_EVERY: u64 = 64;
static TAKEN: AtomicU64 = AtomicU64::new(0);

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

impl Throttle<'_> {
    /// The bucket's lock, whether or not it has ended.
    pub async fn lock(self, bucket: &str) -> StoreResult<Option<ThrottleLock>> {
        Ok(sqlx::query_as::<_, ThrottleLock>(
            "SELECT locked_until, CAST(strikes AS BIGINT) AS strikes FROM throttle_locks WHERE bucket = $1",
        )
        .bind(bucket)
        .fetch_optional_in(self.store.read())
        .await?)
    }

    /// Counts a failure in `bucket` at `now`; returns the bucket's failures after `since`
    /// (this one included), from every instance.
    pub async fn count_failure(self, bucket: &str, now: Timestamp, since: Timestamp) -> StoreResult<i64> {
        sqlx::query("INSERT INTO throttle_failures (bucket, at) VALUES ($1, $2)")
            .bind(bucket)
            .bind(now)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM throttle_failures WHERE bucket = $1 AND at > $2")
            .bind(bucket)
            .bind(since)
            .fetch_one_in(self.store.read())
            .await?;
        Ok(count)
    }

    /// Takes one attempt from `bucket`'s budget of `max` per window starting after `since`:
    /// `Ok(Ok(()))` and the attempt counted, or `Ok(Err(oldest))` with the time of the oldest
    /// attempt still in the window (the budget frees up when it leaves), nothing counted.
    /// Shared by every instance on the database; two instances racing at the very edge of a
    /// budget may both pass once, which a rate limit tolerates.
    pub async fn take(
        self,
        bucket: &str,
        now: Timestamp,
        since: Timestamp,
        max: i64,
    ) -> StoreResult<Result<(), Timestamp>> {
        // The bucket's own expired rows go first, so a budget nobody signs in beside stays small.
        sqlx::query("DELETE FROM throttle_failures WHERE bucket = $1 AND at <= $2")
            .bind(bucket)
            .bind(since)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        let (count, oldest): (i64, Option<i64>) =
            sqlx::query_as("SELECT COUNT(*), MIN(at) FROM throttle_failures WHERE bucket = $1 AND at > $2")
                .bind(bucket)
                .bind(since)
                .fetch_one_in(self.store.read())
                .await?;
        if count >= max {
            return Ok(Err(oldest.unwrap_or(now)));
        }
        sqlx::query("INSERT INTO throttle_failures (bucket, at) VALUES ($1, $2)")
            .bind(bucket)
            .bind(now)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        Ok(Ok(()))
    }

    /// Locks `bucket` and forgets its counted failures (the lock replaces them).
    pub async fn set_lock(self, bucket: &str, lock: ThrottleLock) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO throttle_locks (bucket, locked_until, strikes) VALUES ($1, $2, $3) \
             ON CONFLICT (bucket) DO UPDATE SET locked_until = excluded.locked_until, strikes = excluded.strikes",
        )
        .bind(bucket)
        .bind(lock.locked_until)
        .bind(lock.strikes)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        sqlx::query("DELETE FROM throttle_failures WHERE bucket = $1")
            .bind(bucket)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        Ok(())
    }

    /// Forgets a bucket's failures and lock.
    pub async fn clear(self, bucket: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM throttle_failures WHERE bucket = $1")
            .bind(bucket)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        sqlx::query("DELETE FROM throttle_locks WHERE bucket = $1")
            .bind(bucket)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        Ok(())
    }

    /// Whether `address` signed in to `account` after `since`.
    pub async fn address_known(self, account: &str, address: &str, since: Timestamp) -> StoreResult<bool> {
        let (count,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM throttle_known_addresses WHERE account = $1 AND address = $2 AND at > $3",
        )
        .bind(account)
        .bind(address)
        .bind(since)
        .fetch_one_in(self.store.read())
        .await?;
        Ok(count > 0)
    }

    /// Remembers that `address` signed in to `account` at `now`, keeping the `keep` most recent.
    pub async fn remember_address(self, account: &str, address: &str, now: Timestamp, keep: i64) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO throttle_known_addresses (account, address, at) VALUES ($1, $2, $3) \
             ON CONFLICT (account, address) DO UPDATE SET at = excluded.at",
        )
        .bind(account)
        .bind(address)
        .bind(now)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        sqlx::query(
            "DELETE FROM throttle_known_addresses WHERE account = $1 AND address NOT IN \
             (SELECT address FROM throttle_known_addresses WHERE account = $1 ORDER BY at DESC, address LIMIT $2)",
        )
        .bind(account)
        .bind(keep)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok(())
    }

    /// Deletes failures counted before `failures_before`, locks that ended before
    /// `locks_before` and addresses last seen before `addresses_before`.
    pub async fn sweep(
        self,
        failures_before: Timestamp,
        locks_before: Timestamp,
        addresses_before: Timestamp,
    ) -> StoreResult<()> {
        sqlx::query("DELETE FROM throttle_failures WHERE at <= $1")
            .bind(failures_before)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        sqlx::query("DELETE FROM throttle_locks WHERE locked_until <= $1")
            .bind(locks_before)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        sqlx::query("DELETE FROM throttle_known_addresses WHERE at <= $1")
            .bind(addresses_before)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        Ok(())
    }

    /// Takes one request from `bucket`'s budget of `max` after `since`, in one statement: the
    /// row is inserted only while fewer than `max` are in the window. True when taken. Two
    /// instances racing at the very edge of a budget may both pass once, which a rate limit
    /// tolerates; a refused request is not counted, so refusals do not extend the wait.
    pub async fn budget_take(self, bucket: &str, now: Timestamp, since: Timestamp, max: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "INSERT INTO throttle_failures (bucket, at) SELECT $1, $2 \
             WHERE (SELECT COUNT(*) FROM throttle_failures WHERE bucket = $1 AND at > $3) < $4",
        )
        .bind(bucket)
        .bind(now)
        .bind(since)
        .bind(max)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        if TAKEN.fetch_add(1, Ordering::Relaxed) % PRUNE_EVERY == PRUNE_EVERY - 1 {
            sqlx::query("DELETE FROM throttle_failures WHERE bucket = $1 AND at <= $2")
                .bind(bucket)
                .bind(since)
                .execute(self.store.write(CacheEffect::Nothing))
                .await?;
        }
        Ok(done.rows_affected() == 1)
    }
}
