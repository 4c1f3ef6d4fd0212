//! An open authorization's sealed PKCE verifier, rewrapped under the active key by
//! compare-and-swap on the old value, or given up with its key (`crate::store::sealing`).

use crate::clock::Timestamp;
use crate::store::authorizations::row::Authorizations;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::transaction::Transaction;
use crate::store::machinery::write::On;
use crate::store::sealing::key_ids::key_id_sql;

/// An open authorization's sealed PKCE verifier, for rewrapping.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SealedVerifier {
    pub id: String,
    pub user_id: String,
    pub pkce_verifier_sealed: Vec<u8>,
}

impl Authorizations<'_> {
    /// Up to `limit` authorizations after `after` whose PKCE verifier is not sealed by `active`.
    pub async fn verifiers_to_rewrap(self, active: &str, after: &str, limit: i64) -> StoreResult<Vec<SealedVerifier>> {
        let key_id = key_id_sql(self.store.backend(), "pkce_verifier_sealed");
        Ok(sqlx::query_as::<_, SealedVerifier>(&format!(
            "SELECT id, user_id, pkce_verifier_sealed FROM authorizations \
             WHERE id > $1 AND pkce_verifier_sealed IS NOT NULL AND {key_id} <> $2 ORDER BY id LIMIT $3"
        ))
        .bind(after)
        .bind(active)
        .bind(limit)
        .fetch_all_in(self.store.read())
        .await?)
    }

    /// Replaces a verifier if it is still `old`.
    pub async fn rewrap_verifier(self, id: &str, old: &[u8], new: &[u8]) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE authorizations SET pkce_verifier_sealed = $1 WHERE id = $2 AND pkce_verifier_sealed = $3",
        )
        .bind(new)
        .bind(id)
        .bind(old)
        .execute(self.store.write(CacheEffect::Nothing))
        .await
        .map_err(StoreError::from_write)?;
        Ok(done.rows_affected() == 1)
    }
}

impl Authorizations<'_> {
    /// `admin keys forget`'s step for open authorizations, within its transaction: one holding
    /// a verifier sealed with `key_id` ends as `failure`. How many.
    pub(in crate::store) async fn forget_sealed_by(
        self,
        tx: &mut Transaction<'_>,
        key_id: &str,
        failure: &str,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let verifier = key_id_sql(self.store.backend(), "pkce_verifier_sealed");
        let sql = format!(
            "UPDATE authorizations SET status = 'failed', failure = $1, pkce_verifier_sealed = NULL, state_hash = NULL, \
             updated_at = $2 WHERE pkce_verifier_sealed IS NOT NULL AND {verifier} = $3"
        );
        let forget = sqlx::query(&sql).bind(failure).bind(now).bind(key_id);
        Ok(On::Within(tx).execute(CacheEffect::Nothing, forget).await.map_err(StoreError::from_write)?.rows_affected())
    }
}
