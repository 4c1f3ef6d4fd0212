//! The built-in authorization server's grants, authorization codes and refresh tokens (see
//! [`crate::authorization_server`]).
//!
//! A grant is one approval of a client by a user; its code and every refresh token descend from
//! it. Codes and refresh tokens are stored only as SHA-256 hashes. The one-time steps are
//! compare-and-swap updates — a code is consumed by `used_at IS NULL → now`, a refresh token
//! rotated by `rotated_at IS NULL → now` — so the caller that sees zero rows affected lost (a
//! replay, or a concurrent use) on one instance or many. Revoking the grant ends them all.

use super::{Store, StoreResult};
use crate::clock::Timestamp;

/// How long a used or expired code is kept, so a late replay is still recognised as one.
pub const USED_CODE_RETENTION_SECS: i64 = 24 * 60 * 60;

/// What a user approved for a client.
#[derive(Debug, Clone)]
pub struct NewOAuthGrant<'a> {
    pub id: &'a str,
    pub client_id: &'a str,
    pub user_id: &'a str,
    pub scope: &'a str,
    pub resource: &'a str,
    pub refresh_allowed: bool,
}

/// The code issued with a new grant (the caller hashes it).
#[derive(Debug, Clone)]
pub struct NewOAuthCode<'a> {
    pub code_hash: &'a str,
    pub redirect_uri: &'a str,
    pub code_challenge: &'a str,
    pub expires_at: Timestamp,
}

/// A grant's fields, carried by the code and refresh-token rows.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OAuthGrantFields {
    pub grant_id: String,
    pub client_id: String,
    pub user_id: String,
    pub scope: String,
    pub resource: String,
    pub refresh_allowed: i64,
    pub grant_revoked_at: Option<Timestamp>,
}

impl OAuthGrantFields {
    pub fn refresh_allowed(&self) -> bool {
        self.refresh_allowed != 0
    }
}

/// An authorization code, by hash, with its grant.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OAuthCodeRow {
    pub code_hash: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub expires_at: Timestamp,
    pub used_at: Option<Timestamp>,
    #[sqlx(flatten)]
    pub grant: OAuthGrantFields,
}

/// A refresh token, by hash, with its grant.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OAuthRefreshTokenRow {
    pub token_hash: String,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub rotated_at: Option<Timestamp>,
    #[sqlx(flatten)]
    pub grant: OAuthGrantFields,
}

/// One live approval of an MCP client by a user.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OAuthGrantRow {
    pub id: String,
    pub client_id: String,
    pub scope: String,
    pub created_at: Timestamp,
}

const GRANT_FIELDS: &str = "g.id AS grant_id, g.client_id, g.user_id, g.scope, g.resource, g.refresh_allowed, g.revoked_at AS grant_revoked_at";

impl Store {
    /// Records an approval and its code in one transaction. Also drops codes that expired more
    /// than [`USED_CODE_RETENTION_SECS`] ago (they can no longer be redeemed or replayed usefully).
    pub async fn create_oauth_grant_with_code(
        &self,
        grant: &NewOAuthGrant<'_>,
        code: &NewOAuthCode<'_>,
        now: Timestamp,
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        sqlx::query(
            "INSERT INTO oauth_grants (id, client_id, user_id, scope, resource, refresh_allowed, created_at, revoked_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)",
        )
        .bind(grant.id)
        .bind(grant.client_id)
        .bind(grant.user_id)
        .bind(grant.scope)
        .bind(grant.resource)
        .bind(i64::from(grant.refresh_allowed))
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(super::StoreError::from_write)?;
        sqlx::query(
            "INSERT INTO oauth_codes (code_hash, grant_id, redirect_uri, code_challenge, expires_at, used_at) \
             VALUES ($1, $2, $3, $4, $5, NULL)",
        )
        .bind(code.code_hash)
        .bind(grant.id)
        .bind(code.redirect_uri)
        .bind(code.code_challenge)
        .bind(code.expires_at)
        .execute(&mut *tx)
        .await
        .map_err(super::StoreError::from_write)?;
        sqlx::query("DELETE FROM oauth_codes WHERE expires_at < $1")
            .bind(now - USED_CODE_RETENTION_SECS)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn oauth_code(&self, code_hash: &str) -> StoreResult<Option<OAuthCodeRow>> {
        Ok(sqlx::query_as::<_, OAuthCodeRow>(&format!(
            "SELECT c.code_hash, c.redirect_uri, c.code_challenge, c.expires_at, c.used_at, {GRANT_FIELDS} \
             FROM oauth_codes c JOIN oauth_grants g ON g.id = c.grant_id WHERE c.code_hash = $1"
        ))
        .bind(code_hash)
        .fetch_optional(self.pool())
        .await?)
    }

    /// Marks the code used if nobody has yet and it has not expired. True when this caller won.
    pub async fn consume_oauth_code(&self, code_hash: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE oauth_codes SET used_at = $1 WHERE code_hash = $2 AND used_at IS NULL AND expires_at > $1",
        )
        .bind(now)
        .bind(code_hash)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn insert_oauth_refresh_token(
        &self,
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
        .execute(self.pool())
        .await
        .map_err(super::StoreError::from_write)?;
        Ok(())
    }

    pub async fn oauth_refresh_token(&self, token_hash: &str) -> StoreResult<Option<OAuthRefreshTokenRow>> {
        Ok(sqlx::query_as::<_, OAuthRefreshTokenRow>(&format!(
            "SELECT t.token_hash, t.created_at, t.expires_at, t.rotated_at, {GRANT_FIELDS} \
             FROM oauth_refresh_tokens t JOIN oauth_grants g ON g.id = t.grant_id WHERE t.token_hash = $1"
        ))
        .bind(token_hash)
        .fetch_optional(self.pool())
        .await?)
    }

    /// Retires a refresh token if it is still current and unexpired. True when this caller won;
    /// false means it was already rotated (a replay) or raced another use.
    pub async fn rotate_oauth_refresh_token(&self, token_hash: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE oauth_refresh_tokens SET rotated_at = $1 \
             WHERE token_hash = $2 AND rotated_at IS NULL AND expires_at > $1",
        )
        .bind(now)
        .bind(token_hash)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Revokes a grant (and with it its code and every refresh token). True if it was live.
    pub async fn revoke_oauth_grant(&self, grant_id: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE oauth_grants SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
            .bind(now)
            .bind(grant_id)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The user's live approvals of MCP clients, oldest first (the connections page).
    pub async fn active_oauth_grants_for_user(&self, user_id: &str) -> StoreResult<Vec<OAuthGrantRow>> {
        Ok(sqlx::query_as::<_, OAuthGrantRow>(
            "SELECT id, client_id, scope, created_at FROM oauth_grants WHERE user_id = $1 AND revoked_at IS NULL \
             ORDER BY created_at, id",
        )
        .bind(user_id)
        .fetch_all(self.pool())
        .await?)
    }

    /// Revokes every live grant of this user to `client_id`: its access and refresh tokens stop
    /// working at once. Returns how many grants were live.
    pub async fn revoke_oauth_grants_of_client(
        &self,
        user_id: &str,
        client_id: &str,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE oauth_grants SET revoked_at = $1 WHERE user_id = $2 AND client_id = $3 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(user_id)
        .bind(client_id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// The user a grant belongs to.
    pub async fn oauth_grant_user(&self, grant_id: &str) -> StoreResult<Option<String>> {
        let row: Option<(String,)> = sqlx::query_as("SELECT user_id FROM oauth_grants WHERE id = $1")
            .bind(grant_id)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(|(user_id,)| user_id))
    }

    /// Whether a grant exists and is not revoked: what a bearer check can ask about the
    /// `grant_id` claim of an access token the authorization server issued.
    pub async fn oauth_grant_is_active(&self, grant_id: &str) -> StoreResult<bool> {
        let row: Option<(Option<i64>,)> = sqlx::query_as("SELECT revoked_at FROM oauth_grants WHERE id = $1")
            .bind(grant_id)
            .fetch_optional(self.pool())
            .await?;
        Ok(matches!(row, Some((None,))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store_with_user() -> (tempfile::TempDir, Store, String) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}/t.db?mode=rwc", dir.path().display())).await.unwrap();
        store.migrate().await.unwrap();
        let user = store.create_local_user("http://issuer", "alice", "hash", 1).await.unwrap();
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
        store.create_oauth_grant_with_code(&grant("g1", &user), &code("h1", 1_060), 1_000).await.unwrap();
        store.create_oauth_grant_with_code(&grant("g2", &user), &code("h2", 1_060), 1_000).await.unwrap();

        let row = store.oauth_code("h1").await.unwrap().unwrap();
        assert_eq!((row.grant.client_id.as_str(), row.grant.user_id.as_str()), ("c1", user.as_str()));
        assert!(row.grant.refresh_allowed());
        assert!(store.consume_oauth_code("h1", 1_000).await.unwrap());
        assert!(!store.consume_oauth_code("h1", 1_001).await.unwrap());
        assert!(!store.consume_oauth_code("h2", 1_060).await.unwrap(), "expired codes cannot be consumed");
        assert!(store.oauth_code("missing").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_refresh_token_rotates_once_and_dies_with_its_grant() {
        let (_dir, store, user) = store_with_user().await;
        store.create_oauth_grant_with_code(&grant("g1", &user), &code("h1", 1_060), 1_000).await.unwrap();
        store.insert_oauth_refresh_token("r1", "g1", 1_000, 5_000).await.unwrap();
        store.insert_oauth_refresh_token("r2", "g1", 1_000, 5_000).await.unwrap();

        assert!(store.rotate_oauth_refresh_token("r1", 1_010).await.unwrap());
        assert!(!store.rotate_oauth_refresh_token("r1", 1_011).await.unwrap(), "a rotated token cannot rotate twice");
        assert!(store.oauth_grant_is_active("g1").await.unwrap());
        assert!(store.revoke_oauth_grant("g1", 1_020).await.unwrap());
        assert!(!store.revoke_oauth_grant("g1", 1_021).await.unwrap());
        assert!(!store.oauth_grant_is_active("g1").await.unwrap());
        assert!(!store.oauth_grant_is_active("nope").await.unwrap());
        let r2 = store.oauth_refresh_token("r2").await.unwrap().unwrap();
        assert_eq!(r2.grant.grant_revoked_at, Some(1_020));
        assert_eq!(store.oauth_code("h1").await.unwrap().unwrap().grant.grant_revoked_at, Some(1_020));
    }

    #[tokio::test]
    async fn old_codes_are_swept_when_new_ones_are_issued() {
        let (_dir, store, user) = store_with_user().await;
        store.create_oauth_grant_with_code(&grant("g1", &user), &code("old", 1_060), 1_000).await.unwrap();
        let later = 1_061 + USED_CODE_RETENTION_SECS;
        store.create_oauth_grant_with_code(&grant("g2", &user), &code("new", later + 60), later).await.unwrap();
        assert!(store.oauth_code("old").await.unwrap().is_none());
        assert!(store.oauth_code("new").await.unwrap().is_some());
    }
}
