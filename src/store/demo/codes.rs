//! The demo provider's authorization codes (`demo_codes`), stored only as SHA-256 hashes and in
//! no cache. A code is consumed by compare-and-swap (`used_at IS NULL → now`): the caller that
//! sees zero rows affected lost the race and treats it as a replay.

use crate::clock::Timestamp;
use crate::domain::demo_scopes::ScopeSet;
use crate::store::demo::tokens::Demo;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};

/// An authorization code, by hash.
#[derive(Debug, Clone)]
pub struct DemoCodeRow {
    pub code_hash: String,
    pub client_id: String,
    pub redirect_uri: String,
    /// Space separated in the column.
    pub scopes: ScopeSet,
    pub account: String,
    pub code_challenge: String,
    pub expires_at: i64,
    pub used_at: Option<i64>,
}

/// The row as stored; read only through [`DemoCodeRow::try_from`].
#[derive(sqlx::FromRow)]
struct RawDemoCodeRow {
    code_hash: String,
    client_id: String,
    redirect_uri: String,
    scopes: String,
    account: String,
    code_challenge: String,
    expires_at: i64,
    used_at: Option<i64>,
}

impl TryFrom<RawDemoCodeRow> for DemoCodeRow {
    type Error = StoreError;

    fn try_from(raw: RawDemoCodeRow) -> Result<Self, Self::Error> {
        let scopes = ScopeSet::from_stored(&raw.scopes)
            .map_err(|_| StoreError::Corrupt("a demo code has an unknown scope".into()))?;
        Ok(DemoCodeRow {
            code_hash: raw.code_hash,
            client_id: raw.client_id,
            redirect_uri: raw.redirect_uri,
            scopes,
            account: raw.account,
            code_challenge: raw.code_challenge,
            expires_at: raw.expires_at,
            used_at: raw.used_at,
        })
    }
}

const CODE_COLUMNS: &str = "code_hash, client_id, redirect_uri, scopes, account, code_challenge, expires_at, used_at";

impl Demo<'_> {
    pub async fn insert_code(self, code: &DemoCodeRow) -> StoreResult<()> {
        sqlx::query(&format!("INSERT INTO demo_codes ({CODE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"))
            .bind(&code.code_hash)
            .bind(&code.client_id)
            .bind(&code.redirect_uri)
            .bind(code.scopes.to_space_separated())
            .bind(&code.account)
            .bind(&code.code_challenge)
            .bind(code.expires_at)
            .bind(code.used_at)
            .execute(self.store.write(CacheEffect::Nothing))
            .await
            .map_err(StoreError::from_write)?;
        Ok(())
    }

    pub async fn code(self, code_hash: &str) -> StoreResult<Option<DemoCodeRow>> {
        sqlx::query_as::<_, RawDemoCodeRow>(&format!("SELECT {CODE_COLUMNS} FROM demo_codes WHERE code_hash = $1"))
            .bind(code_hash)
            .fetch_optional_in(self.store.read())
            .await?
            .map(DemoCodeRow::try_from)
            .transpose()
    }

    /// Marks the code used if nobody has yet and it has not expired. True when this caller won.
    pub async fn consume_code(self, code_hash: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE demo_codes SET used_at = $1 WHERE code_hash = $2 AND used_at IS NULL AND expires_at > $1",
        )
        .bind(now)
        .bind(code_hash)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::migrated_for_tests as store;

    fn code(hash: &str, expires_at: i64) -> DemoCodeRow {
        DemoCodeRow {
            code_hash: hash.into(),
            client_id: "c".into(),
            redirect_uri: "http://x/cb".into(),
            scopes: ScopeSet::from_stored("profile").unwrap(),
            account: "demo-user".into(),
            code_challenge: "ch".into(),
            expires_at,
            used_at: None,
        }
    }

    #[tokio::test]
    async fn a_code_is_consumed_exactly_once_and_not_after_expiry() {
        let (_dir, store) = store().await;
        store.demo().insert_code(&code("h1", 1_060)).await.unwrap();
        store.demo().insert_code(&code("h2", 1_060)).await.unwrap();

        assert!(store.demo().consume_code("h1", 1_000).await.unwrap());
        assert!(!store.demo().consume_code("h1", 1_001).await.unwrap());
        assert_eq!(store.demo().code("h1").await.unwrap().unwrap().used_at, Some(1_000));
        assert!(!store.demo().consume_code("h2", 1_060).await.unwrap(), "expired codes cannot be consumed");
        assert!(!store.demo().consume_code("missing", 1_000).await.unwrap());
    }
}
