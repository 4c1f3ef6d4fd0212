//! The broker's JWT signing keys. The private key is sealed like any other secret.

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::store::Store;
use crate::store::machinery::transaction::Transaction;
use crate::store::machinery::write::On;
use crate::store::sealing::key_ids::key_id_sql;

/// The handle on the JWT signing keys: `store.signing_keys()`.
#[derive(Debug, Clone, Copy)]
pub struct SigningKeys<'s> {
    pub(in crate::store) store: &'s Store,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SigningKeyRow {
    pub kid: String,
    pub algorithm: String,
    pub private_key_sealed: Vec<u8>,
    pub public_key: Vec<u8>,
    pub created_at: i64,
    pub retired_at: Option<i64>,
}

/// A signing key's sealed private half, for rewrapping.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SealedSigningKey {
    pub kid: String,
    pub private_key_sealed: Vec<u8>,
}

impl SigningKeys<'_> {
    pub async fn all(self) -> StoreResult<Vec<SigningKeyRow>> {
        Ok(sqlx::query_as::<_, SigningKeyRow>(
            "SELECT kid, algorithm, private_key_sealed, public_key, created_at, retired_at FROM signing_keys ORDER BY created_at DESC, kid",
        ).fetch_all_in(self.store.read())
        .await?)
    }

    /// Inserts a key. Two instances starting at once may both try; `Conflict`-free because each
    /// key has its own kid, and readers take the newest active key.
    pub async fn insert(self, row: &SigningKeyRow) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO signing_keys (kid, algorithm, private_key_sealed, public_key, created_at, retired_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&row.kid)
        .bind(&row.algorithm)
        .bind(&row.private_key_sealed)
        .bind(&row.public_key)
        .bind(row.created_at)
        .bind(row.retired_at)
        .execute(self.store.write(CacheEffect::Nothing))
        .await
        .map_err(StoreError::from_write)?;
        Ok(())
    }

    pub async fn retire(self, kid: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE signing_keys SET retired_at = $1 WHERE kid = $2 AND retired_at IS NULL")
            .bind(now)
            .bind(kid)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Inserts `row` as the only active key: every other active key is retired at `now`, and
    /// keys retired before `drop_retired_before` (all their tokens have expired) are deleted,
    /// in one transaction, so readers never see no active key.
    pub async fn rotate(self, row: &SigningKeyRow, now: Timestamp, drop_retired_before: Timestamp) -> StoreResult<()> {
        self.store.bounded(async {
            // No cache reads signing keys: tokens are verified against the keys in memory, and a
            // retired key keeps verifying until its tokens have expired.
            let mut tx = self.store.begin(CacheEffect::Nothing).await?;
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

    /// Signing keys whose private half is not sealed by `active` (there are few: no paging).
    pub async fn to_rewrap(self, active: &str) -> StoreResult<Vec<SealedSigningKey>> {
        let key_id = key_id_sql(self.store.backend(), "private_key_sealed");
        Ok(sqlx::query_as::<_, SealedSigningKey>(&format!(
            "SELECT kid, private_key_sealed FROM signing_keys WHERE {key_id} <> $1 ORDER BY kid"
        ))
        .bind(active)
        .fetch_all_in(self.store.read())
        .await?)
    }

    /// Replaces a signing key's sealed private half if it is still `old`.
    pub async fn rewrap(self, kid: &str, old: &[u8], new: &[u8]) -> StoreResult<bool> {
        let done =
            sqlx::query("UPDATE signing_keys SET private_key_sealed = $1 WHERE kid = $2 AND private_key_sealed = $3")
                .bind(new)
                .bind(kid)
                .bind(old)
                .execute(self.store.write(CacheEffect::Nothing))
                .await
                .map_err(StoreError::from_write)?;
        Ok(done.rows_affected() == 1)
    }
}

impl SigningKeys<'_> {
    /// `admin keys forget`'s step for signing keys, within its transaction: those sealed with
    /// `key_id` are deleted (a new one is made at the next start when none is left). How many.
    pub(in crate::store) async fn forget_sealed_by(self, tx: &mut Transaction<'_>, key_id: &str) -> StoreResult<u64> {
        let private = key_id_sql(self.store.backend(), "private_key_sealed");
        let sql = format!("DELETE FROM signing_keys WHERE {private} = $1");
        let forget = sqlx::query(&sql).bind(key_id);
        Ok(On::Within(tx).execute(CacheEffect::Nothing, forget).await.map_err(StoreError::from_write)?.rows_affected())
    }
}
