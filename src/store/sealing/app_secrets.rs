//! The client secrets of organizations' own OAuth apps ([`crate::store::organizations::apps`]),
//! as key management sees them: across every organization, by the key that sealed them.

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::transaction::Transaction;
use crate::store::machinery::write::On;
use crate::store::sealing::inventory::Sealed;
use crate::store::sealing::key_ids::key_id_sql;

/// An app version's sealed secret, with what it is sealed to.
#[derive(Debug, Clone)]
pub struct SealedAppSecret {
    pub id: String,
    pub organization_id: String,
    pub sealed: Vec<u8>,
}

impl Sealed<'_> {
    /// App secrets not sealed with `active`.
    pub async fn app_secrets_to_rewrap(self, active: &str) -> StoreResult<Vec<SealedAppSecret>> {
        let key_id = key_id_sql(self.store.backend(), "client_secret_sealed");
        let rows: Vec<(String, String, Vec<u8>)> = sqlx::query_as(&format!(
            "SELECT id, organization_id, client_secret_sealed FROM provider_apps \
             WHERE client_secret_sealed IS NOT NULL AND {key_id} <> $1 ORDER BY id"
        ))
        .bind(active)
        .fetch_all_in(self.store.read())
        .await?;
        Ok(rows
            .into_iter()
            .map(|(id, organization_id, sealed)| SealedAppSecret { id, organization_id, sealed })
            .collect())
    }

    /// Replaces an app version's sealed secret if it is still `old` (the plaintext is the same).
    pub async fn rewrap_app_secret(self, id: &str, old: &[u8], new: &[u8]) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE provider_apps SET client_secret_sealed = $1 WHERE id = $2 AND client_secret_sealed = $3",
        )
        .bind(new)
        .bind(id)
        .bind(old)
        .execute(self.store.write(CacheEffect::Nothing))
        .await
        .map_err(StoreError::from_write)?;
        Ok(done.rows_affected() == 1)
    }

    /// `admin keys forget`'s step for app secrets, within its transaction: the grants an app
    /// version sealed with `key_id` issued need a new consent, and the versions are removed (the
    /// organization sets its app again). How many versions.
    pub(in crate::store) async fn forget_app_secrets(
        self,
        tx: &mut Transaction<'_>,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let secret = key_id_sql(self.store.backend(), "client_secret_sealed");
        let lost = format!("SELECT id FROM provider_apps WHERE client_secret_sealed IS NOT NULL AND {secret} = $1");
        let grants = format!(
            "UPDATE grants SET status = 'needs_reconsent', version = version + 1, updated_at = $1 WHERE app_id IN ({})",
            lost.replace("$1", "$2")
        );
        let mark = sqlx::query(&grants).bind(now).bind(key_id);
        On::Within(&mut *tx).execute(CacheEffect::Everyone, mark).await.map_err(StoreError::from_write)?;
        let delete_sql = format!("DELETE FROM provider_apps WHERE id IN ({lost})");
        let delete = sqlx::query(&delete_sql).bind(key_id);
        Ok(On::Within(tx).execute(CacheEffect::Everyone, delete).await.map_err(StoreError::from_write)?.rows_affected())
    }
}
