//! Browser sessions (the consent pages' sign-in). The cookie holds a random value; only its
//! SHA-256 is stored, so a database reader cannot ride a session.

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::counts::COUNT_CAP;
use crate::store::machinery::counts::Count;
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::store::Store;

/// The handle on browser sessions: `store.browser_sessions()`.
#[derive(Debug, Clone, Copy)]
pub struct BrowserSessions<'s> {
    pub(in crate::store) store: &'s Store,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct BrowserSession {
    pub id_hash: String,
    pub user_id: String,
    /// Per-session CSRF secret embedded in forms.
    pub csrf_token: String,
    pub created_at: i64,
    pub expires_at: i64,
}

impl BrowserSessions<'_> {
    pub async fn create(
        self,
        id_hash: &str,
        user_id: &str,
        csrf_token: &str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreResult<()> {
        sqlx::query("INSERT INTO browser_sessions (id_hash, user_id, csrf_token, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(id_hash)
            .bind(user_id)
            .bind(csrf_token)
            .bind(now)
            .bind(expires_at)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        Ok(())
    }

    /// The live session with this hash, if any (expired ones are treated as absent).
    pub async fn live(self, id_hash: &str, now: Timestamp) -> StoreResult<Option<BrowserSession>> {
        Ok(sqlx::query_as::<_, BrowserSession>(
            "SELECT id_hash, user_id, csrf_token, created_at, expires_at FROM browser_sessions WHERE id_hash = $1 AND expires_at > $2",
        )
        .bind(id_hash)
        .bind(now).fetch_optional_in(self.store.read())
        .await?)
    }

    pub async fn delete(self, id_hash: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM browser_sessions WHERE id_hash = $1")
            .bind(id_hash)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        Ok(())
    }

    /// Signs a user out everywhere (after a password change).
    pub async fn delete_for_user(self, user_id: &str) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM browser_sessions WHERE user_id = $1")
            .bind(user_id)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        Ok(done.rows_affected())
    }

    pub async fn delete_expired(self, now: Timestamp) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM browser_sessions WHERE expires_at <= $1")
            .bind(now)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        Ok(done.rows_affected())
    }

    /// Browser sessions that have not expired at `now`: exact up to [`COUNT_CAP`], then
    /// "more than" (reading at most that many index entries).
    pub async fn count_live(self, now: Timestamp) -> StoreResult<Count> {
        let (n,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM (SELECT 1 FROM browser_sessions WHERE expires_at > $1 LIMIT $2) capped",
        )
        .bind(now)
        .bind(COUNT_CAP + 1)
        .fetch_one_in(self.store.read())
        .await?;
        Ok(if n <= COUNT_CAP { Count::Exact(n) } else { Count::AtLeast(COUNT_CAP) })
    }
}
