//! The demo provider's access and refresh tokens (`demo_tokens`), stored only as SHA-256
//! hashes. Only they are cached (the live access tokens, under everyone's generation): their
//! revocations are declared [`CacheEffect::Everyone`], every other write
//! [`CacheEffect::Nothing`] (a new token is in no cache, and unknown tokens are never kept). A
//! refresh token is rotated by compare-and-swap (`revoked_at IS NULL → now`): the caller that
//! sees zero rows affected lost the race and treats it as a replay.

use crate::clock::Timestamp;
use crate::domain::demo_scopes::ScopeSet;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::store::Store;

/// The handle on the demo provider's tables: `store.demo()`.
#[derive(Debug, Clone, Copy)]
pub struct Demo<'s> {
    pub(in crate::store) store: &'s Store,
}

/// What a token is; stored in `demo_tokens.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DemoTokenKind {
    Access,
    Refresh,
}

impl DemoTokenKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Access => "access",
            Self::Refresh => "refresh",
        }
    }

    /// The kind stored as `value`, `None` for anything else.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "access" => Some(Self::Access),
            "refresh" => Some(Self::Refresh),
            _ => None,
        }
    }
}

/// An access or refresh token, by hash. `family_id` links every token descended from one code.
#[derive(Debug, Clone)]
pub struct DemoTokenRow {
    pub token_hash: String,
    pub kind: DemoTokenKind,
    pub family_id: String,
    pub client_id: String,
    pub account: String,
    /// Space separated in the column.
    pub scopes: ScopeSet,
    pub expires_at: i64,
    pub revoked_at: Option<i64>,
}

/// The row as stored; read only through [`DemoTokenRow::try_from`].
#[derive(sqlx::FromRow)]
struct RawDemoTokenRow {
    token_hash: String,
    kind: String,
    family_id: String,
    client_id: String,
    account: String,
    scopes: String,
    expires_at: i64,
    revoked_at: Option<i64>,
}

impl TryFrom<RawDemoTokenRow> for DemoTokenRow {
    type Error = StoreError;

    fn try_from(raw: RawDemoTokenRow) -> Result<Self, Self::Error> {
        let kind = DemoTokenKind::parse(&raw.kind)
            .ok_or_else(|| StoreError::Corrupt(format!("a demo token has unknown kind {:?}", raw.kind)))?;
        let scopes = ScopeSet::from_stored(&raw.scopes)
            .map_err(|_| StoreError::Corrupt("a demo token has an unknown scope".into()))?;
        Ok(DemoTokenRow {
            token_hash: raw.token_hash,
            kind,
            family_id: raw.family_id,
            client_id: raw.client_id,
            account: raw.account,
            scopes,
            expires_at: raw.expires_at,
            revoked_at: raw.revoked_at,
        })
    }
}

/// A new token to store (the caller hashes it).
#[derive(Debug, Clone)]
pub struct NewDemoToken<'a> {
    pub token_hash: &'a str,
    pub kind: DemoTokenKind,
    pub family_id: &'a str,
    pub client_id: &'a str,
    pub account: &'a str,
    pub scopes: &'a ScopeSet,
    pub expires_at: Timestamp,
}

const TOKEN_COLUMNS: &str = "token_hash, kind, family_id, client_id, account, scopes, expires_at, revoked_at";

impl Demo<'_> {
    pub async fn insert_token(self, token: &NewDemoToken<'_>) -> StoreResult<()> {
        sqlx::query(&format!("INSERT INTO demo_tokens ({TOKEN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)"))
            .bind(token.token_hash)
            .bind(token.kind.as_str())
            .bind(token.family_id)
            .bind(token.client_id)
            .bind(token.account)
            .bind(token.scopes.to_space_separated())
            .bind(token.expires_at)
            .execute(self.store.write(CacheEffect::Nothing))
            .await
            .map_err(StoreError::from_write)?;
        Ok(())
    }

    pub async fn token(self, token_hash: &str) -> StoreResult<Option<DemoTokenRow>> {
        sqlx::query_as::<_, RawDemoTokenRow>(&format!("SELECT {TOKEN_COLUMNS} FROM demo_tokens WHERE token_hash = $1"))
            .bind(token_hash)
            .fetch_optional_in(self.store.read())
            .await?
            .map(DemoTokenRow::try_from)
            .transpose()
    }

    /// Revokes one token if it is still live. True when this caller revoked it (for refresh
    /// rotation: false means someone else already used it).
    pub async fn revoke_token(self, token_hash: &str, now: Timestamp) -> StoreResult<bool> {
        let sql = "UPDATE demo_tokens SET revoked_at = $1 WHERE token_hash = $2 AND revoked_at IS NULL";
        Ok(self.demo_revoke(sql, now, token_hash).await? == 1)
    }

    /// Revokes every live token of a family; returns how many were still live.
    pub async fn revoke_family(self, family_id: &str, now: Timestamp) -> StoreResult<u64> {
        let sql = "UPDATE demo_tokens SET revoked_at = $1 WHERE family_id = $2 AND revoked_at IS NULL";
        self.demo_revoke(sql, now, family_id).await
    }

    /// One revocation (`sql` binds `now`, then `key`); returns how many tokens were revoked.
    /// Servers keep live access tokens under everyone's generation
    /// (`src/demo_provider/token_cache.rs`): this one drops them at once, and every other
    /// once its watcher sees `auth_epoch`, which the revocation moved (triggers of migration
    /// 0017) — never before the revocation is visible to it.
    async fn demo_revoke(self, sql: &'static str, now: Timestamp, key: &str) -> StoreResult<u64> {
        let done = sqlx::query(sql).bind(now).bind(key).execute(self.store.write(CacheEffect::Everyone)).await?;
        Ok(done.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::demo::codes::DemoCodeRow;
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

    fn token<'a>(hash: &'a str, kind: DemoTokenKind, family: &'a str, scopes: &'a ScopeSet) -> NewDemoToken<'a> {
        NewDemoToken {
            token_hash: hash,
            kind,
            family_id: family,
            client_id: "c",
            account: "demo-user",
            scopes,
            expires_at: 2_000,
        }
    }

    #[tokio::test]
    async fn revoking_a_family_revokes_all_its_live_tokens_and_only_them() {
        let (_dir, store) = store().await;
        let profile = ScopeSet::from_stored("profile").unwrap();
        store.demo().insert_token(&token("a1", DemoTokenKind::Access, "f1", &profile)).await.unwrap();
        store.demo().insert_token(&token("r1", DemoTokenKind::Refresh, "f1", &profile)).await.unwrap();
        store.demo().insert_token(&token("a2", DemoTokenKind::Access, "f2", &profile)).await.unwrap();

        assert!(store.demo().revoke_token("r1", 1_000).await.unwrap());
        assert!(!store.demo().revoke_token("r1", 1_001).await.unwrap(), "a rotated token cannot rotate twice");
        assert_eq!(store.demo().revoke_family("f1", 1_002).await.unwrap(), 1);

        assert_eq!(store.demo().token("a1").await.unwrap().unwrap().revoked_at, Some(1_002));
        assert_eq!(store.demo().token("r1").await.unwrap().unwrap().revoked_at, Some(1_000));
        assert_eq!(store.demo().token("a2").await.unwrap().unwrap().revoked_at, None);
        assert_eq!(store.demo().token("r1").await.unwrap().unwrap().kind, DemoTokenKind::Refresh);
    }

    #[tokio::test]
    async fn tokens_read_back_typed_and_nonsense_is_corrupt() {
        let (_dir, store) = store().await;
        let scopes = ScopeSet::from_stored("notes:read profile").unwrap();
        store.demo().insert_token(&token("a1", DemoTokenKind::Access, "f1", &scopes)).await.unwrap();
        let row = store.demo().token("a1").await.unwrap().unwrap();
        assert_eq!((row.kind, &row.scopes), (DemoTokenKind::Access, &scopes));

        sqlx::query("UPDATE demo_tokens SET kind = 'id_token'").execute(store.pool()).await.unwrap();
        assert!(matches!(store.demo().token("a1").await, Err(StoreError::Corrupt(_))));
        sqlx::query("UPDATE demo_tokens SET kind = 'access', scopes = 'profile admin'")
            .execute(store.pool())
            .await
            .unwrap();
        assert!(matches!(store.demo().token("a1").await, Err(StoreError::Corrupt(_))));
        store.demo().insert_code(&code("h1", 1_060)).await.unwrap();
        sqlx::query("UPDATE demo_codes SET scopes = 'everything'").execute(store.pool()).await.unwrap();
        assert!(matches!(store.demo().code("h1").await, Err(StoreError::Corrupt(_))));
    }
}
