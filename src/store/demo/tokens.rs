//! The demo provider's tables (see `src/demo_provider/`). Only `demo_tokens` is cached (the
//! live access tokens, under everyone's generation): its revocations are declared
//! [`CacheEffect::Everyone`], every other write [`CacheEffect::Nothing`] (a new token or code is
//! in no cache, and unknown tokens are never kept).
//!
//! Codes and tokens are stored only as SHA-256 hashes. The one-time steps are compare-and-swap
//! updates: a code is consumed by `used_at IS NULL → now`, a refresh token is rotated by
//! `revoked_at IS NULL → now`; the caller that sees zero rows affected lost the race and treats
//! it as a replay.

use crate::clock::Timestamp;
use crate::domain::demo_scopes::ScopeSet;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::store::Store;

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

#[derive(Debug, Clone, sqlx::FromRow, serde::Serialize)]
pub struct DemoNoteRow {
    pub id: i64,
    #[serde(skip)]
    pub account: String,
    pub text: String,
    pub created_at: i64,
}

const CODE_COLUMNS: &str = "code_hash, client_id, redirect_uri, scopes, account, code_challenge, expires_at, used_at";
const TOKEN_COLUMNS: &str = "token_hash, kind, family_id, client_id, account, scopes, expires_at, revoked_at";

impl Store {
    pub async fn demo_insert_code(&self, code: &DemoCodeRow) -> StoreResult<()> {
        sqlx::query(&format!("INSERT INTO demo_codes ({CODE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"))
            .bind(&code.code_hash)
            .bind(&code.client_id)
            .bind(&code.redirect_uri)
            .bind(code.scopes.to_space_separated())
            .bind(&code.account)
            .bind(&code.code_challenge)
            .bind(code.expires_at)
            .bind(code.used_at)
            .execute(self.write(CacheEffect::Nothing))
            .await
            .map_err(StoreError::from_write)?;
        Ok(())
    }

    pub async fn demo_code(&self, code_hash: &str) -> StoreResult<Option<DemoCodeRow>> {
        sqlx::query_as::<_, RawDemoCodeRow>(&format!("SELECT {CODE_COLUMNS} FROM demo_codes WHERE code_hash = $1"))
            .bind(code_hash)
            .fetch_optional_in(self.read())
            .await?
            .map(DemoCodeRow::try_from)
            .transpose()
    }

    /// Marks the code used if nobody has yet and it has not expired. True when this caller won.
    pub async fn demo_consume_code(&self, code_hash: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE demo_codes SET used_at = $1 WHERE code_hash = $2 AND used_at IS NULL AND expires_at > $1",
        )
        .bind(now)
        .bind(code_hash)
        .execute(self.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn demo_insert_token(&self, token: &NewDemoToken<'_>) -> StoreResult<()> {
        sqlx::query(&format!("INSERT INTO demo_tokens ({TOKEN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)"))
            .bind(token.token_hash)
            .bind(token.kind.as_str())
            .bind(token.family_id)
            .bind(token.client_id)
            .bind(token.account)
            .bind(token.scopes.to_space_separated())
            .bind(token.expires_at)
            .execute(self.write(CacheEffect::Nothing))
            .await
            .map_err(StoreError::from_write)?;
        Ok(())
    }

    pub async fn demo_token(&self, token_hash: &str) -> StoreResult<Option<DemoTokenRow>> {
        sqlx::query_as::<_, RawDemoTokenRow>(&format!("SELECT {TOKEN_COLUMNS} FROM demo_tokens WHERE token_hash = $1"))
            .bind(token_hash)
            .fetch_optional_in(self.read())
            .await?
            .map(DemoTokenRow::try_from)
            .transpose()
    }

    /// Revokes one token if it is still live. True when this caller revoked it (for refresh
    /// rotation: false means someone else already used it).
    pub async fn demo_revoke_token(&self, token_hash: &str, now: Timestamp) -> StoreResult<bool> {
        let sql = "UPDATE demo_tokens SET revoked_at = $1 WHERE token_hash = $2 AND revoked_at IS NULL";
        Ok(self.demo_revoke(sql, now, token_hash).await? == 1)
    }

    /// Revokes every live token of a family; returns how many were still live.
    pub async fn demo_revoke_family(&self, family_id: &str, now: Timestamp) -> StoreResult<u64> {
        let sql = "UPDATE demo_tokens SET revoked_at = $1 WHERE family_id = $2 AND revoked_at IS NULL";
        self.demo_revoke(sql, now, family_id).await
    }

    /// One revocation (`sql` binds `now`, then `key`); returns how many tokens were revoked.
    /// Servers keep live access tokens under everyone's generation
    /// (`src/demo_provider/token_cache.rs`): this one drops them at once, and every other
    /// once its watcher sees `auth_epoch`, which the revocation moved (triggers of migration
    /// 0017) — never before the revocation is visible to it.
    async fn demo_revoke(&self, sql: &'static str, now: Timestamp, key: &str) -> StoreResult<u64> {
        let done = sqlx::query(sql).bind(now).bind(key).execute(self.write(CacheEffect::Everyone)).await?;
        Ok(done.rows_affected())
    }

    pub async fn demo_notes(&self, account: &str) -> StoreResult<Vec<DemoNoteRow>> {
        Ok(sqlx::query_as::<_, DemoNoteRow>(
            "SELECT id, account, text, created_at FROM demo_notes WHERE account = $1 ORDER BY id",
        )
        .bind(account)
        .fetch_all_in(self.read())
        .await?)
    }

    pub async fn demo_insert_note(&self, account: &str, text: &str, now: Timestamp) -> StoreResult<DemoNoteRow> {
        // RETURNING works on both SQLite (3.35+) and PostgreSQL, and avoids a racy re-read.
        sqlx::query_as::<_, DemoNoteRow>(
            "INSERT INTO demo_notes (account, text, created_at) VALUES ($1, $2, $3) RETURNING id, account, text, created_at",
        )
        .bind(account)
        .bind(text)
        .bind(now)
        .fetch_one(self.write(CacheEffect::Nothing))
        .await
        .map_err(StoreError::from_write)
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
    async fn a_code_is_consumed_exactly_once_and_not_after_expiry() {
        let (_dir, store) = store().await;
        store.demo_insert_code(&code("h1", 1_060)).await.unwrap();
        store.demo_insert_code(&code("h2", 1_060)).await.unwrap();

        assert!(store.demo_consume_code("h1", 1_000).await.unwrap());
        assert!(!store.demo_consume_code("h1", 1_001).await.unwrap());
        assert_eq!(store.demo_code("h1").await.unwrap().unwrap().used_at, Some(1_000));
        assert!(!store.demo_consume_code("h2", 1_060).await.unwrap(), "expired codes cannot be consumed");
        assert!(!store.demo_consume_code("missing", 1_000).await.unwrap());
    }

    #[tokio::test]
    async fn revoking_a_family_revokes_all_its_live_tokens_and_only_them() {
        let (_dir, store) = store().await;
        let profile = ScopeSet::from_stored("profile").unwrap();
        store.demo_insert_token(&token("a1", DemoTokenKind::Access, "f1", &profile)).await.unwrap();
        store.demo_insert_token(&token("r1", DemoTokenKind::Refresh, "f1", &profile)).await.unwrap();
        store.demo_insert_token(&token("a2", DemoTokenKind::Access, "f2", &profile)).await.unwrap();

        assert!(store.demo_revoke_token("r1", 1_000).await.unwrap());
        assert!(!store.demo_revoke_token("r1", 1_001).await.unwrap(), "a rotated token cannot rotate twice");
        assert_eq!(store.demo_revoke_family("f1", 1_002).await.unwrap(), 1);

        assert_eq!(store.demo_token("a1").await.unwrap().unwrap().revoked_at, Some(1_002));
        assert_eq!(store.demo_token("r1").await.unwrap().unwrap().revoked_at, Some(1_000));
        assert_eq!(store.demo_token("a2").await.unwrap().unwrap().revoked_at, None);
        assert_eq!(store.demo_token("r1").await.unwrap().unwrap().kind, DemoTokenKind::Refresh);
    }

    #[tokio::test]
    async fn tokens_read_back_typed_and_nonsense_is_corrupt() {
        let (_dir, store) = store().await;
        let scopes = ScopeSet::from_stored("notes:read profile").unwrap();
        store.demo_insert_token(&token("a1", DemoTokenKind::Access, "f1", &scopes)).await.unwrap();
        let row = store.demo_token("a1").await.unwrap().unwrap();
        assert_eq!((row.kind, &row.scopes), (DemoTokenKind::Access, &scopes));

        sqlx::query("UPDATE demo_tokens SET kind = 'id_token'").execute(store.pool()).await.unwrap();
        assert!(matches!(store.demo_token("a1").await, Err(StoreError::Corrupt(_))));
        sqlx::query("UPDATE demo_tokens SET kind = 'access', scopes = 'profile admin'")
            .execute(store.pool())
            .await
            .unwrap();
        assert!(matches!(store.demo_token("a1").await, Err(StoreError::Corrupt(_))));
        store.demo_insert_code(&code("h1", 1_060)).await.unwrap();
        sqlx::query("UPDATE demo_codes SET scopes = 'everything'").execute(store.pool()).await.unwrap();
        assert!(matches!(store.demo_code("h1").await, Err(StoreError::Corrupt(_))));
    }

    #[tokio::test]
    async fn notes_belong_to_one_account_in_insertion_order() {
        let (_dir, store) = store().await;
        let first = store.demo_insert_note("alice", "one", 10).await.unwrap();
        store.demo_insert_note("bob", "theirs", 11).await.unwrap();
        let second = store.demo_insert_note("alice", "two", 12).await.unwrap();

        let notes = store.demo_notes("alice").await.unwrap();
        assert_eq!(notes.iter().map(|n| n.text.as_str()).collect::<Vec<_>>(), ["one", "two"]);
        assert_eq!((notes[0].id, notes[1].id), (first.id, second.id));
        assert_eq!(second.created_at, 12);
    }
}
