//! Client consents: a user's permission for one MCP client to use one of their connections
//! (MCP security best practices §Confused deputy). A consent names the grant, the client (see
//! [`crate::identity::ClientIdentity::key`]) and the scopes the user allowed; it covers the grant
//! only while the grant carries no scope beyond those ([`ConsentRow::covers`]). Rows go with
//! their grant (`ON DELETE CASCADE`).

use super::{Store, StoreResult};
use crate::clock::Timestamp;
use crate::domain::Scopes;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ConsentRow {
    pub grant_id: String,
    pub client_key: String,
    pub user_id: String,
    pub client_name: Option<String>,
    pub scopes: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl ConsentRow {
    /// Whether this consent lets its client use a grant that carries `granted`: every scope
    /// the token carries must have been allowed, since the client could exercise any of them.
    pub fn covers(&self, granted: &Scopes) -> bool {
        Scopes::from_space_separated(&self.scopes).is_ok_and(|allowed| allowed.is_superset_of(granted))
    }
}

/// How approving a consent-only authorization went ([`Store::allow_client`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowOutcome {
    /// The authorization completed and the consent is recorded, together.
    Allowed,
    /// The authorization was no longer pending (approved, declined or expired meanwhile).
    NotPending,
    /// The grant is gone or not the user's: nothing changed.
    GrantGone,
}

/// The consent to record when a consent-only authorization is approved.
#[derive(Debug, Clone)]
pub struct NewConsent<'a> {
    pub authorization_id: &'a str,
    pub grant_id: &'a str,
    pub user_id: &'a str,
    pub client_key: &'a str,
    pub client_name: Option<&'a str>,
    pub scopes: &'a str,
}

/// Records (or replaces) a consent: `$1` client key, `$2` client name, `$3` scopes, `$4` now,
/// `$5` grant id, `$6` user id. INSERT … SELECT from grants, so a consent is never written for
/// a grant that is gone or belongs to someone else, whatever the caller passed; the statement
/// affects no row then. (The WHERE clause also keeps SQLite from reading `ON CONFLICT` as part
/// of the SELECT: do not drop it.)
const UPSERT_CONSENT: &str = "INSERT INTO client_consents (grant_id, client_key, user_id, client_name, scopes, created_at, updated_at) \
     SELECT id, $1, user_id, $2, $3, $4, $4 FROM grants WHERE id = $5 AND user_id = $6 \
     ON CONFLICT (grant_id, client_key) DO UPDATE SET client_name = excluded.client_name, \
     scopes = excluded.scopes, updated_at = excluded.updated_at";

const CONSENT_COLUMNS: &str = "grant_id, client_key, user_id, client_name, scopes, created_at, updated_at";

impl Store {
    /// Records (or replaces) the consent for `client_key` to use `grant_id` with `scopes`.
    /// Returns false when the grant no longer exists (it was disconnected meanwhile).
    pub async fn record_consent(
        &self,
        grant_id: &str,
        user_id: &str,
        client_key: &str,
        client_name: Option<&str>,
        scopes: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let done = sqlx::query(UPSERT_CONSENT)
            .bind(client_key)
            .bind(client_name)
            .bind(scopes)
            .bind(now)
            .bind(grant_id)
            .bind(user_id)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Completes a pending consent-only authorization and records its consent in one
    /// transaction: both happen, or neither (the row stays pending if the grant is gone).
    pub async fn allow_client(&self, new: &NewConsent<'_>, now: Timestamp) -> StoreResult<AllowOutcome> {
        let mut tx = self.pool().begin().await?;
        let completed = sqlx::query(
            "UPDATE authorizations SET status = 'completed', updated_at = $1 \
             WHERE id = $2 AND user_id = $3 AND kind = 'consent' AND status = 'pending' AND expires_at > $1",
        )
        .bind(now)
        .bind(new.authorization_id)
        .bind(new.user_id)
        .execute(&mut *tx)
        .await?;
        if completed.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(AllowOutcome::NotPending);
        }
        let recorded = sqlx::query(UPSERT_CONSENT)
            .bind(new.client_key)
            .bind(new.client_name)
            .bind(new.scopes)
            .bind(now)
            .bind(new.grant_id)
            .bind(new.user_id)
            .execute(&mut *tx)
            .await?;
        if recorded.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(AllowOutcome::GrantGone);
        }
        tx.commit().await?;
        Ok(AllowOutcome::Allowed)
    }

    pub async fn consent(&self, grant_id: &str, client_key: &str) -> StoreResult<Option<ConsentRow>> {
        Ok(sqlx::query_as::<_, ConsentRow>(&format!(
            "SELECT {CONSENT_COLUMNS} FROM client_consents WHERE grant_id = $1 AND client_key = $2"
        ))
        .bind(grant_id)
        .bind(client_key)
        .fetch_optional(self.pool())
        .await?)
    }

    /// The user's consents, by grant then client.
    pub async fn consents_for_user(&self, user_id: &str) -> StoreResult<Vec<ConsentRow>> {
        Ok(sqlx::query_as::<_, ConsentRow>(&format!(
            "SELECT {CONSENT_COLUMNS} FROM client_consents WHERE user_id = $1 ORDER BY grant_id, client_key"
        ))
        .bind(user_id)
        .fetch_all(self.pool())
        .await?)
    }

    /// Every consent (admin listing), newest first.
    pub async fn all_consents(&self, limit: i64) -> StoreResult<Vec<ConsentRow>> {
        Ok(sqlx::query_as::<_, ConsentRow>(&format!(
            "SELECT {CONSENT_COLUMNS} FROM client_consents ORDER BY updated_at DESC LIMIT $1"
        ))
        .bind(limit)
        .fetch_all(self.pool())
        .await?)
    }

    /// Withdraws one consent of this user; false if there was none.
    pub async fn revoke_consent(&self, user_id: &str, grant_id: &str, client_key: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM client_consents WHERE user_id = $1 AND grant_id = $2 AND client_key = $3")
            .bind(user_id)
            .bind(grant_id)
            .bind(client_key)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Withdraws every consent of this user for one client; returns how many there were.
    pub async fn revoke_client_consents(&self, user_id: &str, client_key: &str) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM client_consents WHERE user_id = $1 AND client_key = $2")
            .bind(user_id)
            .bind(client_key)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }
}
