//! Single use of MCP 2026-07-28 `requestState` values that carried a question (migration 0021;
//! `src/mcp/input_required/` decides when a state is spent). The row is the proof, shared by
//! every instance on the database: the first retry that spends a nonce inserts it, any later one
//! finds it there.

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::CacheEffect;
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::store::Store;

/// The handle on spent request states: `store.request_states()`.
#[derive(Debug, Clone, Copy)]
pub struct RequestStates<'s> {
    pub(in crate::store) store: &'s Store,
}

impl RequestStates<'_> {
    /// Spends `nonce` (valid until `expires_at`): `true` the first time, `false` when it was
    /// spent before. Rows of states that expired by `now` go first (after that their states are
    /// refused on their expiry alone), so the table holds only live states.
    pub async fn spend(self, nonce: &str, expires_at: Timestamp, now: Timestamp) -> StoreResult<bool> {
        sqlx::query("DELETE FROM request_state_uses WHERE expires_at <= $1")
            .bind(now)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        let inserted = sqlx::query(
            "INSERT INTO request_state_uses (nonce, expires_at) VALUES ($1, $2) ON CONFLICT (nonce) DO NOTHING",
        )
        .bind(nonce)
        .bind(expires_at)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok(inserted.rows_affected() == 1)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::migrated_for_tests as store;

    #[tokio::test]
    async fn a_nonce_is_spent_once() {
        let (_dir, store) = store().await;
        assert!(store.request_states().spend("n1", 2_000, 1_000).await.unwrap());
        assert!(!store.request_states().spend("n1", 2_000, 1_000).await.unwrap(), "the second use is refused");
        assert!(store.request_states().spend("n2", 2_000, 1_000).await.unwrap(), "another nonce is its own");
    }

    #[tokio::test]
    async fn expired_rows_are_removed_by_a_later_use() {
        let (_dir, store) = store().await;
        assert!(store.request_states().spend("old", 1_500, 1_000).await.unwrap());
        assert!(store.request_states().spend("new", 9_000, 2_000).await.unwrap());
        let (rows,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM request_state_uses").fetch_one(store.pool()).await.unwrap();
        assert_eq!(rows, 1, "the expired state's row is gone");
    }
}
