//! The authorization codes and refresh tokens the authorization server issues, each with the
//! grant it descends from. Both are stored only as SHA-256 hashes, and each one-time step is a
//! compare-and-swap: a code is consumed by `used_at IS NULL → now`, a refresh token rotated by
//! `rotated_at IS NULL → now`, so the caller that sees zero rows affected lost (a replay, or a
//! concurrent use), on one instance or many. Revoking the grant ends them all.

use crate::clock::Timestamp;
use crate::store::authorization_server::grants::GRANT_FIELDS;
use crate::store::authorization_server::grants::OAuthGrantFields;
use crate::store::authorization_server::grants::OAuthGrants;
use crate::store::authorization_server::grants::RawOAuthGrantFields;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};

/// An authorization code, by hash, with its grant.
#[derive(Debug, Clone)]
pub struct OAuthCodeRow {
    pub code_hash: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub expires_at: Timestamp,
    pub used_at: Option<Timestamp>,
    pub grant: OAuthGrantFields,
}

/// A refresh token, by hash, with its grant.
#[derive(Debug, Clone)]
pub struct OAuthRefreshTokenRow {
    pub token_hash: String,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub rotated_at: Option<Timestamp>,
    pub grant: OAuthGrantFields,
}

/// The row as stored; read only through [`OAuthCodeRow::try_from`].
#[derive(sqlx::FromRow)]
struct RawOAuthCodeRow {
    code_hash: String,
    redirect_uri: String,
    code_challenge: String,
    expires_at: Timestamp,
    used_at: Option<Timestamp>,
    #[sqlx(flatten)]
    grant: RawOAuthGrantFields,
}

impl TryFrom<RawOAuthCodeRow> for OAuthCodeRow {
    type Error = StoreError;

    fn try_from(raw: RawOAuthCodeRow) -> Result<Self, Self::Error> {
        Ok(OAuthCodeRow {
            code_hash: raw.code_hash,
            redirect_uri: raw.redirect_uri,
            code_challenge: raw.code_challenge,
            expires_at: raw.expires_at,
            used_at: raw.used_at,
            grant: raw.grant.try_into()?,
        })
    }
}

/// The row as stored; read only through [`OAuthRefreshTokenRow::try_from`].
#[derive(sqlx::FromRow)]
struct RawOAuthRefreshTokenRow {
    token_hash: String,
    created_at: Timestamp,
    expires_at: Timestamp,
    rotated_at: Option<Timestamp>,
    #[sqlx(flatten)]
    grant: RawOAuthGrantFields,
}

impl TryFrom<RawOAuthRefreshTokenRow> for OAuthRefreshTokenRow {
    type Error = StoreError;

    fn try_from(raw: RawOAuthRefreshTokenRow) -> Result<Self, Self::Error> {
        Ok(OAuthRefreshTokenRow {
            token_hash: raw.token_hash,
            created_at: raw.created_at,
            expires_at: raw.expires_at,
            rotated_at: raw.rotated_at,
            grant: raw.grant.try_into()?,
        })
    }
}

impl OAuthGrants<'_> {
    pub async fn code(self, code_hash: &str) -> StoreResult<Option<OAuthCodeRow>> {
        sqlx::query_as::<_, RawOAuthCodeRow>(&format!(
            "SELECT c.code_hash, c.redirect_uri, c.code_challenge, c.expires_at, c.used_at, {GRANT_FIELDS} \
             FROM oauth_codes c JOIN oauth_grants g ON g.id = c.grant_id WHERE c.code_hash = $1"
        ))
        .bind(code_hash)
        .fetch_optional_in(self.store.read())
        .await?
        .map(OAuthCodeRow::try_from)
        .transpose()
    }

    /// Marks the code used if nobody has yet and it has not expired. True when this caller won.
    pub async fn consume_code(self, code_hash: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE oauth_codes SET used_at = $1 WHERE code_hash = $2 AND used_at IS NULL AND expires_at > $1",
        )
        .bind(now)
        .bind(code_hash)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn insert_refresh_token(
        self,
        token_hash: &str,
        grant_id: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO oauth_refresh_tokens (token_hash, grant_id, created_at, expires_at, rotated_at) \
             VALUES ($1, $2, $3, $4, NULL)",
        )
        .bind(token_hash)
        .bind(grant_id)
        .bind(now)
        .bind(expires_at)
        .execute(self.store.write(CacheEffect::Nothing))
        .await
        .map_err(StoreError::from_write)?;
        Ok(())
    }

    pub async fn refresh_token(self, token_hash: &str) -> StoreResult<Option<OAuthRefreshTokenRow>> {
        sqlx::query_as::<_, RawOAuthRefreshTokenRow>(&format!(
            "SELECT t.token_hash, t.created_at, t.expires_at, t.rotated_at, {GRANT_FIELDS} \
             FROM oauth_refresh_tokens t JOIN oauth_grants g ON g.id = t.grant_id WHERE t.token_hash = $1"
        ))
        .bind(token_hash)
        .fetch_optional_in(self.store.read())
        .await?
        .map(OAuthRefreshTokenRow::try_from)
        .transpose()
    }

    /// Retires a refresh token if it is still current and unexpired. True when this caller won;
    /// false means it was already rotated (a replay) or raced another use.
    pub async fn rotate_refresh_token(self, token_hash: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE oauth_refresh_tokens SET rotated_at = $1 \
             WHERE token_hash = $2 AND rotated_at IS NULL AND expires_at > $1",
        )
        .bind(now)
        .bind(token_hash)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

#[cfg(test)]
mod tests {

    use crate::store::authorization_server::grants::{NewOAuthCode, NewOAuthGrant};
    use crate::store::machinery::store::Store;

    async fn store_with_user() -> (tempfile::TempDir, Store, String) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}/t.db?mode=rwc", dir.path().display())).await.unwrap();
        store.migrate().await.unwrap();
        let user = store.users().create_local("http://issuer", "alice", "hash", 1).await.unwrap();
        (dir, store, user.id)
    }

    fn grant<'a>(id: &'a str, user_id: &'a str) -> NewOAuthGrant<'a> {
        NewOAuthGrant {
            id,
            client_id: "c1",
            user_id,
            scope: "mcp",
            resource: "http://issuer/mcp",
            refresh_allowed: true,
        }
    }

    fn code(hash: &str, expires_at: i64) -> NewOAuthCode<'_> {
        NewOAuthCode { code_hash: hash, redirect_uri: "http://127.0.0.1:9/cb", code_challenge: "ch", expires_at }
    }

    #[tokio::test]
    async fn a_code_is_consumed_exactly_once_and_not_after_expiry() {
        let (_dir, store, user) = store_with_user().await;
        store.oauth_grants().create_with_code(&grant("g1", &user), &code("h1", 1_060), 1_000).await.unwrap();
        store.oauth_grants().create_with_code(&grant("g2", &user), &code("h2", 1_060), 1_000).await.unwrap();

        let row = store.oauth_grants().code("h1").await.unwrap().unwrap();
        assert_eq!((row.grant.client_id.as_str(), row.grant.user_id.as_str()), ("c1", user.as_str()));
        assert!(row.grant.refresh_allowed);
        assert!(store.oauth_grants().consume_code("h1", 1_000).await.unwrap());
        assert!(!store.oauth_grants().consume_code("h1", 1_001).await.unwrap());
        assert!(!store.oauth_grants().consume_code("h2", 1_060).await.unwrap(), "expired codes cannot be consumed");
        assert!(store.oauth_grants().code("missing").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_refresh_token_rotates_once_and_dies_with_its_grant() {
        let (_dir, store, user) = store_with_user().await;
        store.oauth_grants().create_with_code(&grant("g1", &user), &code("h1", 1_060), 1_000).await.unwrap();
        store.oauth_grants().insert_refresh_token("r1", "g1", 1_000, 5_000).await.unwrap();
        store.oauth_grants().insert_refresh_token("r2", "g1", 1_000, 5_000).await.unwrap();

        assert!(store.oauth_grants().rotate_refresh_token("r1", 1_010).await.unwrap());
        assert!(
            !store.oauth_grants().rotate_refresh_token("r1", 1_011).await.unwrap(),
            "a rotated token cannot rotate twice"
        );
        assert!(store.oauth_grants().is_active("g1").await.unwrap());
        assert!(store.oauth_grants().revoke("g1", 1_020).await.unwrap());
        assert!(!store.oauth_grants().revoke("g1", 1_021).await.unwrap());
        assert!(!store.oauth_grants().is_active("g1").await.unwrap());
        assert!(!store.oauth_grants().is_active("nope").await.unwrap());
        let r2 = store.oauth_grants().refresh_token("r2").await.unwrap().unwrap();
        assert_eq!(r2.grant.grant_revoked_at, Some(1_020));
        assert_eq!(store.oauth_grants().code("h1").await.unwrap().unwrap().grant.grant_revoked_at, Some(1_020));
    }
}
