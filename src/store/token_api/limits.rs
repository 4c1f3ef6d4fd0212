//! Rows of the token API's limits (`src/identity/service_limits.rs` decides; this stores), shared by
//! every instance on the database: concurrent waits as leased rows of `api_waits` (migration
//! 0014), and the addresses found not locked for failed service authentications, remembered
//! for a moment. The token API's request budget is [`crate::store::token_api::budget`]'s; the
//! failures it counts are the throttle's rows ([`crate::store::throttle`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::kept::Kept;
use crate::store::machinery::store::Store;

/// The handle on the token API's limits: `store.api_limits()`.
#[derive(Debug, Clone, Copy)]
pub struct ApiLimits<'s> {
    pub(in crate::store) store: &'s Store,
}

/// How long an address found not locked for failed service authentications is taken as still
/// not locked without asking the database again: a lock another instance sets is seen here at
/// most this late (one this instance sets, at once).
pub const UNLOCKED_FRESH: Duration = Duration::from_secs(1);
/// At most this many addresses are remembered; a full map starts over.
const UNLOCKED_KEPT: usize = 100_000;

/// Addresses found not locked, and when (see [`UNLOCKED_FRESH`]).
#[derive(Debug, Default)]
pub(in crate::store) struct UnlockedAddresses {
    seen: Mutex<HashMap<String, Instant>>,
}

impl Kept for UnlockedAddresses {}

impl UnlockedAddresses {
    fn seen(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ApiLimits<'_> {
    /// Whether `bucket` was found not locked less than [`UNLOCKED_FRESH`] ago.
    pub fn recently_unlocked(self, bucket: &str) -> bool {
        self.store.kept::<UnlockedAddresses>().seen().get(bucket).is_some_and(|at| at.elapsed() < UNLOCKED_FRESH)
    }

    /// `bucket` was just found not locked.
    pub fn found_unlocked(self, bucket: &str) {
        let addresses = self.store.kept::<UnlockedAddresses>();
        let mut seen = addresses.seen();
        if seen.len() >= UNLOCKED_KEPT && !seen.contains_key(bucket) {
            seen.clear();
        }
        seen.insert(bucket.to_owned(), Instant::now());
    }

    /// A failure was counted for `bucket`: ask the database again next time.
    pub fn forget_unlocked(self, bucket: &str) {
        self.store.kept::<UnlockedAddresses>().seen().remove(bucket);
    }

    /// Takes a wait slot `id` for `service_id` until `expires_at` if fewer than `max` of its
    /// slots are live at `now`; true when taken. Lapsed slots of the service go first.
    pub async fn wait_slot_take(
        self,
        id: &str,
        service_id: &str,
        now: Timestamp,
        expires_at: Timestamp,
        max: i64,
    ) -> StoreResult<bool> {
        sqlx::query("DELETE FROM api_waits WHERE service_id = $1 AND expires_at <= $2")
            .bind(service_id)
            .bind(now)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        let done = sqlx::query(
            "INSERT INTO api_waits (id, service_id, expires_at) SELECT $1, $2, $3 \
             WHERE (SELECT COUNT(*) FROM api_waits WHERE service_id = $2 AND expires_at > $4) < $5",
        )
        .bind(id)
        .bind(service_id)
        .bind(expires_at)
        .bind(now)
        .bind(max)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Extends a live slot's lease.
    pub async fn wait_slot_renew(self, id: &str, expires_at: Timestamp) -> StoreResult<()> {
        sqlx::query("UPDATE api_waits SET expires_at = $2 WHERE id = $1")
            .bind(id)
            .bind(expires_at)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        Ok(())
    }

    /// Frees a slot.
    pub async fn wait_slot_release(self, id: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM api_waits WHERE id = $1")
            .bind(id)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        Ok(())
    }

    /// The service's slots live at `now`, from every instance.
    pub async fn wait_slots_live(self, service_id: &str, now: Timestamp) -> StoreResult<i64> {
        let (count,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM api_waits WHERE service_id = $1 AND expires_at > $2")
                .bind(service_id)
                .bind(now)
                .fetch_one_in(self.store.read())
                .await?;
        Ok(count)
    }
}
