//! The signal outbox (PostgreSQL): what one instance tells the others, as rows that carry ids
//! only. A trigger (migration 0010) announces each row with `NOTIFY`; `src/events/outbox_listener.rs` reads
//! the table to catch up after its listener reconnected.

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::store::Store;

/// The handle on the signal outbox: `store.signals()`.
#[derive(Debug, Clone, Copy)]
pub struct Signals<'s> {
    pub(in crate::store) store: &'s Store,
}

/// One signal as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct OutboxRow {
    pub id: i64,
    /// The process that sent it.
    pub origin: String,
    /// The signal, as JSON.
    pub payload: String,
}

impl Signals<'_> {
    /// Appends a signal; the database announces it to every listening instance.
    pub async fn append(self, origin: &str, payload: &str, now: Timestamp) -> StoreResult<i64> {
        let (id,): (i64,) =
            sqlx::query_as("INSERT INTO signal_outbox (origin, payload, created_at) VALUES ($1, $2, $3) RETURNING id")
                .bind(origin)
                .bind(payload)
                .bind(now)
                .fetch_one(self.store.write(CacheEffect::Nothing))
                .await?;
        Ok(id)
    }

    /// Signals with an id above `after`, oldest first, at most `limit`.
    pub async fn after(self, after: i64, limit: i64) -> StoreResult<Vec<OutboxRow>> {
        Ok(sqlx::query_as::<_, OutboxRow>(
            "SELECT id, origin, payload FROM signal_outbox WHERE id > $1 ORDER BY id LIMIT $2",
        )
        .bind(after)
        .bind(limit)
        .fetch_all_in(self.store.read())
        .await?)
    }

    /// The newest signal's id (0 when there is none): where a new listener starts.
    pub async fn latest_id(self) -> StoreResult<i64> {
        let (id,): (i64,) =
            sqlx::query_as("SELECT COALESCE(MAX(id), 0) FROM signal_outbox").fetch_one_in(self.store.read()).await?;
        Ok(id)
    }

    /// Forgets signals created before `before`; returns how many.
    pub async fn prune(self, before: Timestamp) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM signal_outbox WHERE created_at < $1")
            .bind(before)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        Ok(done.rows_affected())
    }
}
