//! The broker's JWT signing keys. The private key is sealed like any other secret.

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::store::Store;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SigningKeyRow {
    pub kid: String,
    pub algorithm: String,
    pub private_key_sealed: Vec<u8>,
    pub public_key: Vec<u8>,
    pub created_at: i64,
    pub retired_at: Option<i64>,
}

impl Store {
    pub async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRow>> {
        Ok(sqlx::query_as::<_, SigningKeyRow>(
            "SELECT kid, algorithm, private_key_sealed, public_key, created_at, retired_at FROM signing_keys ORDER BY created_at DESC, kid",
        ).fetch_all_in(self.read())
        .await?)
    }

    /// Inserts a key. Two instances starting at once may both try; `Conflict`-free because each
    /// key has its own kid, and readers take the newest active key.
    pub async fn insert_signing_key(&self, row: &SigningKeyRow) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO signing_keys (kid, algorithm, private_key_sealed, public_key, created_at, retired_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&row.kid)
        .bind(&row.algorithm)
        .bind(&row.private_key_sealed)
        .bind(&row.public_key)
        .bind(row.created_at)
        .bind(row.retired_at)
        .execute(self.write(CacheEffect::Nothing))
        .await
        .map_err(StoreError::from_write)?;
        Ok(())
    }

    pub async fn retire_signing_key(&self, kid: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE signing_keys SET retired_at = $1 WHERE kid = $2 AND retired_at IS NULL")
            .bind(now)
            .bind(kid)
            .execute(self.write(CacheEffect::Nothing))
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Inserts `row` as the only active key: every other active key is retired at `now`, and
    /// keys retired before `drop_retired_before` (all their tokens have expired) are deleted,
    /// in one transaction, so readers never see no active key.
    pub async fn rotate_signing_key(
        &self,
        row: &SigningKeyRow,
        now: Timestamp,
        drop_retired_before: Timestamp,
    ) -> StoreResult<()> {
        self.bounded(async {
            // No cache reads signing keys: tokens are verified against the keys in memory, and a
            // retired key keeps verifying until its tokens have expired.
            let mut tx = self.begin(CacheEffect::Nothing).await?;
            sqlx::query("DELETE FROM signing_keys WHERE retired_at IS NOT NULL AND retired_at < $1")
                .bind(drop_retired_before)
                .execute(&mut *tx)
                .await?;
            sqlx::query("UPDATE signing_keys SET retired_at = $1 WHERE retired_at IS NULL")
                .bind(now)
                .execute(&mut *tx)
                .await?;
            sqlx::query(
                "INSERT INTO signing_keys (kid, algorithm, private_key_sealed, public_key, created_at, retired_at) VALUES ($1, $2, $3, $4, $5, NULL)",
            )
            .bind(&row.kid)
            .bind(&row.algorithm)
            .bind(&row.private_key_sealed)
            .bind(&row.public_key)
            .bind(row.created_at)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_write)?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}
