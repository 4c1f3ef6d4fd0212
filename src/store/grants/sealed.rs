//! A grant's sealed values, rewrapped under the active key by compare-and-swap on the row's
//! version (never while a refresh holds the lease), or given up with their key
//! (`crate::store::sealing`).

use crate::store::machinery::cache_effect::FetchIn;
use crate::store::machinery::error::{StoreError, StoreResult};

use crate::clock::Timestamp;
use crate::store::grants::row::Grants;
use crate::store::machinery::cache_effect::CacheEffect;
use crate::store::machinery::transaction::Transaction;
use crate::store::machinery::write::On;
use crate::store::sealing::key_ids::key_id_sql;

/// A grant's sealed values, for rewrapping.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SealedGrant {
    pub id: String,
    pub user_id: String,
    pub provider: String,
    pub access_token_sealed: Vec<u8>,
    pub refresh_token_sealed: Option<Vec<u8>>,
    pub version: i64,
}

impl Grants<'_> {
    /// Up to `limit` grants after `after` (by id) with a value not sealed by `active`, leaving
    /// out grants being refreshed (their refresh stores by compare-and-swap on the old value).
    pub async fn to_rewrap(self, active: &str, after: &str, limit: i64) -> StoreResult<Vec<SealedGrant>> {
        let access = key_id_sql(self.store.backend(), "access_token_sealed");
        let refresh = key_id_sql(self.store.backend(), "refresh_token_sealed");
        Ok(sqlx::query_as::<_, SealedGrant>(&format!(
            "SELECT id, user_id, provider, access_token_sealed, refresh_token_sealed, version FROM grants \
             WHERE id > $1 AND ({access} <> $2 OR (refresh_token_sealed IS NOT NULL AND {refresh} <> $2)) \
             AND refresh_lease_holder IS NULL ORDER BY id LIMIT $3"
        ))
        .bind(after)
        .bind(active)
        .bind(limit)
        .fetch_all_in(self.store.read())
        .await?)
    }

    /// Replaces a grant's sealed values if the row is still at `version` and nobody took its
    /// refresh lease meanwhile. The version moves on, so a refresh that read the row before
    /// claims nothing and reads it again. False when the row changed (left for the next pass).
    pub async fn rewrap(
        self,
        grant: &SealedGrant,
        access: &[u8],
        refresh: Option<&[u8]>,
        key_id: &str,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE grants SET access_token_sealed = $1, refresh_token_sealed = $2, key_id = $3, version = version + 1 \
             WHERE id = $4 AND version = $5 AND refresh_lease_holder IS NULL",
        )
        .bind(access)
        .bind(refresh)
        .bind(key_id)
        .bind(&grant.id)
        .bind(grant.version)
        .execute(self.store.write(CacheEffect::User(&grant.user_id)))
        .await
        .map_err(StoreError::from_write)?;
        Ok(done.rows_affected() == 1)
    }
}

impl Grants<'_> {
    /// `admin keys forget`'s step for grants, within its transaction: a grant holding a value
    /// sealed with `key_id` needs a new consent (its token values are emptied, which no key
    /// opens, so nothing tries). How many.
    pub(in crate::store) async fn forget_sealed_by(
        self,
        tx: &mut Transaction<'_>,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let access = key_id_sql(self.store.backend(), "access_token_sealed");
        let refresh = key_id_sql(self.store.backend(), "refresh_token_sealed");
        let sql = format!(
            "UPDATE grants SET status = 'needs_reconsent', access_token_sealed = $1, refresh_token_sealed = NULL, \
             version = version + 1, updated_at = $2 \
             WHERE {access} = $3 OR (refresh_token_sealed IS NOT NULL AND {refresh} = $3)"
        );
        let forget = sqlx::query(&sql).bind(Vec::<u8>::new()).bind(now).bind(key_id);
        // Any number of users' grants.
        Ok(On::Within(tx).execute(CacheEffect::Everyone, forget).await.map_err(StoreError::from_write)?.rows_affected())
    }
}
