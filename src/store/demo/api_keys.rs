//! The demo provider's API keys (`demo_api_keys`, migration 0027), stored as SHA-256 hashes.
//! Nothing caches them: every API call with a key reads its row, so a revocation holds at once
//! on every instance.

use crate::clock::Timestamp;
use crate::store::demo::tokens::Demo;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};

/// One issued key, by hash.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DemoApiKeyRow {
    pub key_hash: String,
    pub account: String,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

impl Demo<'_> {
    pub async fn insert_api_key(self, key_hash: &str, account: &str, now: Timestamp) -> StoreResult<()> {
        sqlx::query("INSERT INTO demo_api_keys (key_hash, account, created_at, revoked_at) VALUES ($1, $2, $3, NULL)")
            .bind(key_hash)
            .bind(account)
            .bind(now)
            .execute(self.store.write(CacheEffect::Nothing))
            .await
            .map_err(StoreError::from_write)?;
        Ok(())
    }

    pub async fn api_key(self, key_hash: &str) -> StoreResult<Option<DemoApiKeyRow>> {
        Ok(sqlx::query_as::<_, DemoApiKeyRow>(
            "SELECT key_hash, account, created_at, revoked_at FROM demo_api_keys WHERE key_hash = $1",
        )
        .bind(key_hash)
        .fetch_optional_in(self.store.read())
        .await?)
    }

    /// Revokes a live key. True when this call revoked it.
    pub async fn revoke_api_key(self, key_hash: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE demo_api_keys SET revoked_at = $1 WHERE key_hash = $2 AND revoked_at IS NULL")
            .bind(now)
            .bind(key_hash)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
