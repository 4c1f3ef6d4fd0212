//! The built-in authorization server's grants, authorization codes and refresh tokens (see
//! `src/authorization_server/`).
//!
//! A grant is one approval of a client by a user; its code and every refresh token descend from
//! it. Codes and refresh tokens are stored only as SHA-256 hashes. The one-time steps are
//! compare-and-swap updates — a code is consumed by `used_at IS NULL → now`, a refresh token
//! rotated by `rotated_at IS NULL → now` — so the caller that sees zero rows affected lost (a
//! replay, or a concurrent use) on one instance or many. Revoking the grant ends them all.

use crate::clock::Timestamp;
use crate::domain::Scopes;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn, ReturnedUser};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::store::Store;

/// The handle on the authorization server's grants, codes and refresh tokens:
/// `store.oauth_grants()`.
#[derive(Debug, Clone, Copy)]
pub struct OAuthGrants<'s> {
    pub(in crate::store) store: &'s Store,
}

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
#[derive(Debug, Clone)]
pub struct OAuthGrantFields {
    pub grant_id: String,
    pub client_id: String,
    pub user_id: String,
    /// What the user approved; space separated in the column.
    pub scope: Scopes,
    pub resource: String,
    /// The client registered the `refresh_token` grant (0 or 1 in the column).
    pub refresh_allowed: bool,
    pub grant_revoked_at: Option<Timestamp>,
}

/// One live approval of an MCP client by a user.
#[derive(Debug, Clone)]
pub struct OAuthGrantRow {
    pub id: String,
    pub client_id: String,
    /// Space separated in the column.
    pub scope: Scopes,
    pub created_at: Timestamp,
}

/// The grant columns as stored; read only through [`OAuthGrantFields::try_from`].
#[derive(sqlx::FromRow)]
pub(in crate::store) struct RawOAuthGrantFields {
    grant_id: String,
    client_id: String,
    user_id: String,
    scope: String,
    resource: String,
    refresh_allowed: i64,
    grant_revoked_at: Option<Timestamp>,
}

/// A stored scope list, or `Corrupt` naming the grant.
fn stored_scope(grant_id: &str, scope: &str) -> StoreResult<Scopes> {
    Scopes::from_space_separated(scope).map_err(|e| StoreError::Corrupt(format!("oauth grant {grant_id:?}: {e}")))
}

impl TryFrom<RawOAuthGrantFields> for OAuthGrantFields {
    type Error = StoreError;

    fn try_from(raw: RawOAuthGrantFields) -> Result<Self, Self::Error> {
        let scope = stored_scope(&raw.grant_id, &raw.scope)?;
        let refresh_allowed = match raw.refresh_allowed {
            0 => false,
            1 => true,
            _ => {
                return Err(StoreError::Corrupt(format!(
                    "oauth grant {:?} has a refresh_allowed flag that is neither 0 nor 1",
                    raw.grant_id
                )));
            }
        };
        Ok(OAuthGrantFields {
            grant_id: raw.grant_id,
            client_id: raw.client_id,
            user_id: raw.user_id,
            scope,
            resource: raw.resource,
            refresh_allowed,
            grant_revoked_at: raw.grant_revoked_at,
        })
    }
}

/// The row as stored; read only through [`OAuthGrantRow::try_from`].
#[derive(sqlx::FromRow)]
struct RawOAuthGrantRow {
    id: String,
    client_id: String,
    scope: String,
    created_at: Timestamp,
}

impl TryFrom<RawOAuthGrantRow> for OAuthGrantRow {
    type Error = StoreError;

    fn try_from(raw: RawOAuthGrantRow) -> Result<Self, Self::Error> {
        let scope = stored_scope(&raw.id, &raw.scope)?;
        Ok(OAuthGrantRow { id: raw.id, client_id: raw.client_id, scope, created_at: raw.created_at })
    }
}

pub(in crate::store) const GRANT_FIELDS: &str = "g.id AS grant_id, g.client_id, g.user_id, g.scope, g.resource, g.refresh_allowed, g.revoked_at AS grant_revoked_at";

impl OAuthGrants<'_> {
    /// Records an approval and its code in one transaction. Also drops codes that expired more
    /// than [`USED_CODE_RETENTION_SECS`] ago (they can no longer be redeemed or replayed usefully).
    pub async fn create_with_code(
        self,
        grant: &NewOAuthGrant<'_>,
        code: &NewOAuthCode<'_>,
        now: Timestamp,
    ) -> StoreResult<()> {
        self.store.bounded(self.create_oauth_grant_with_code_unbounded(grant, code, now)).await
    }

    /// [`OAuthGrants::create_with_code`] without the bound.
    async fn create_oauth_grant_with_code_unbounded(
        self,
        grant: &NewOAuthGrant<'_>,
        code: &NewOAuthCode<'_>,
        now: Timestamp,
    ) -> StoreResult<()> {
        let mut tx = self.store.begin(CacheEffect::User(grant.user_id)).await?;
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
        .map_err(StoreError::from_write)?;
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
        .map_err(StoreError::from_write)?;
        sqlx::query("DELETE FROM oauth_codes WHERE expires_at < $1")
            .bind(now - USED_CODE_RETENTION_SECS)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Revokes a grant (and with it its code and every refresh token). True if it was live.
    /// Its user's cached bearer tokens are dropped at once (the row names the user).
    pub async fn revoke(self, grant_id: &str, now: Timestamp) -> StoreResult<bool> {
        let revoked = sqlx::query_as::<_, ReturnedUser>(
            "UPDATE oauth_grants SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL RETURNING user_id",
        )
        .bind(now)
        .bind(grant_id);
        Ok(self.store.write_returning_user().fetch_optional(revoked).await?.is_some())
    }

    /// The user's live approvals of MCP clients, oldest first (the connections page).
    pub async fn active_for_user(self, user_id: &str) -> StoreResult<Vec<OAuthGrantRow>> {
        sqlx::query_as::<_, RawOAuthGrantRow>(
            "SELECT id, client_id, scope, created_at FROM oauth_grants WHERE user_id = $1 AND revoked_at IS NULL \
             ORDER BY created_at, id",
        )
        .bind(user_id)
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(OAuthGrantRow::try_from)
        .collect()
    }

    /// Revokes every live grant of this user to `client_id`: its access and refresh tokens stop
    /// working at once. Returns how many grants were live.
    pub async fn revoke_of_client(self, user_id: &str, client_id: &str, now: Timestamp) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE oauth_grants SET revoked_at = $1 WHERE user_id = $2 AND client_id = $3 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(user_id)
        .bind(client_id)
        .execute(self.store.write(CacheEffect::User(user_id)))
        .await?;
        Ok(done.rows_affected())
    }

    /// The user a grant belongs to.
    pub async fn user_of(self, grant_id: &str) -> StoreResult<Option<String>> {
        let row: Option<(String,)> = sqlx::query_as("SELECT user_id FROM oauth_grants WHERE id = $1")
            .bind(grant_id)
            .fetch_optional_in(self.store.read())
            .await?;
        Ok(row.map(|(user_id,)| user_id))
    }

    /// Whether a grant exists and is not revoked: what a bearer check can ask about the
    /// `grant_id` claim of an access token the authorization server issued.
    pub async fn is_active(self, grant_id: &str) -> StoreResult<bool> {
        let row: Option<(Option<i64>,)> = sqlx::query_as("SELECT revoked_at FROM oauth_grants WHERE id = $1")
            .bind(grant_id)
            .fetch_optional_in(self.store.read())
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

    fn raw_fields(scope: &str, refresh_allowed: i64) -> RawOAuthGrantFields {
        RawOAuthGrantFields {
            grant_id: "g1".into(),
            client_id: "c1".into(),
            user_id: "u1".into(),
            scope: scope.into(),
            resource: "http://issuer/mcp".into(),
            refresh_allowed,
            grant_revoked_at: None,
        }
    }

    #[test]
    fn a_malformed_scope_or_flag_is_corrupt() {
        let fields = OAuthGrantFields::try_from(raw_fields("mcp mcp:read", 0)).unwrap();
        assert_eq!((fields.scope, fields.refresh_allowed), (Scopes::parse(["mcp:read", "mcp"]).unwrap(), false));
        for bad in [raw_fields("mcp \"x\"", 1), raw_fields("mcp", 2)] {
            assert!(matches!(OAuthGrantFields::try_from(bad), Err(StoreError::Corrupt(_))));
        }
        let row = RawOAuthGrantRow { id: "g1".into(), client_id: "c1".into(), scope: "a\\b".into(), created_at: 1 };
        assert!(matches!(OAuthGrantRow::try_from(row), Err(StoreError::Corrupt(_))));
    }

    #[tokio::test]
    async fn grants_read_back_with_typed_scopes_and_nonsense_is_corrupt() {
        let (_dir, store, user) = store_with_user().await;
        store.oauth_grants().create_with_code(&grant("g1", &user), &code("h1", 1_060), 1_000).await.unwrap();
        let live = store.oauth_grants().active_for_user(&user).await.unwrap();
        assert_eq!(live[0].scope, Scopes::parse(["mcp"]).unwrap());
        assert_eq!(store.oauth_grants().code("h1").await.unwrap().unwrap().grant.scope, live[0].scope);

        sqlx::query("UPDATE oauth_grants SET refresh_allowed = 7").execute(store.pool()).await.unwrap();
        assert!(matches!(store.oauth_grants().code("h1").await, Err(StoreError::Corrupt(_))));
        sqlx::query("UPDATE oauth_grants SET refresh_allowed = 1, scope = 'mcp \"x\"'")
            .execute(store.pool())
            .await
            .unwrap();
        assert!(matches!(store.oauth_grants().active_for_user(&user).await, Err(StoreError::Corrupt(_))));
    }

    #[tokio::test]
    async fn old_codes_are_swept_when_new_ones_are_issued() {
        let (_dir, store, user) = store_with_user().await;
        store.oauth_grants().create_with_code(&grant("g1", &user), &code("old", 1_060), 1_000).await.unwrap();
        let later = 1_061 + USED_CODE_RETENTION_SECS;
        store.oauth_grants().create_with_code(&grant("g2", &user), &code("new", later + 60), later).await.unwrap();
        assert!(store.oauth_grants().code("old").await.unwrap().is_none());
        assert!(store.oauth_grants().code("new").await.unwrap().is_some());
    }
}
