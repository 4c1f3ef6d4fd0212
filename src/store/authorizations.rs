//! Authorizations: one row per connect attempt (its id is the MCP `elicitationId`).
//!
//! Life of a row: `pending` (created by a tool call) → `redirected` (the owner approved; state
//! and PKCE verifier stored, browser sent to the provider) → `completed` | `failed`; or
//! `declined` (the owner said no), or expired by time. The OAuth `state` is stored only as a
//! hash, bound to this row and to the browser session that approved, and consumed with a
//! compare-and-swap so it works once.

use super::{Store, StoreResult};
use crate::clock::Timestamp;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationStatus {
    Pending,
    Redirected,
    Exchanging,
    Completed,
    Declined,
    Failed,
}

impl AuthorizationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Redirected => "redirected",
            Self::Exchanging => "exchanging",
            Self::Completed => "completed",
            Self::Declined => "declined",
            Self::Failed => "failed",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        Some(match value {
            "pending" => Self::Pending,
            "redirected" => Self::Redirected,
            "exchanging" => Self::Exchanging,
            "completed" => Self::Completed,
            "declined" => Self::Declined,
            "failed" => Self::Failed,
            _ => return None,
        })
    }
}

#[derive(Clone, sqlx::FromRow)]
pub struct AuthorizationRow {
    pub id: String,
    pub user_id: String,
    pub provider: String,
    pub scopes: String,
    pub client_name: Option<String>,
    pub mcp_session: Option<String>,
    /// The client the authorization is for ([`crate::identity::ClientIdentity::key`]); '' on
    /// rows from before consents were per client.
    pub client_key: String,
    /// `connect` or `consent` ([`AuthorizationKind`]).
    pub kind: String,
    /// For `consent` rows: the grant the client asks to use.
    pub grant_id: Option<String>,
    pub status: String,
    pub state_hash: Option<String>,
    pub browser_session_hash: Option<String>,
    pub pkce_verifier_sealed: Option<Vec<u8>>,
    pub failure: Option<String>,
    pub created_at: i64,
    pub expires_at: i64,
    pub updated_at: i64,
}

impl std::fmt::Debug for AuthorizationRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorizationRow")
            .field("id", &self.id)
            .field("user_id", &self.user_id)
            .field("provider", &self.provider)
            .field("scopes", &self.scopes)
            .field("status", &self.status)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

impl AuthorizationRow {
    pub fn status(&self) -> Option<AuthorizationStatus> {
        AuthorizationStatus::parse(&self.status)
    }

    pub fn is_expired(&self, now: Timestamp) -> bool {
        now >= self.expires_at
    }

    pub fn kind(&self) -> AuthorizationKind {
        if self.kind == AuthorizationKind::Consent.as_str() {
            AuthorizationKind::Consent
        } else {
            AuthorizationKind::Connect
        }
    }
}

/// What approving an authorization does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationKind {
    /// Runs the provider's OAuth flow; the new or updated grant is then allowed for the client.
    Connect,
    /// Only lets the client use an existing grant (`grant_id`): no trip to the provider.
    Consent,
}

impl AuthorizationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthorizationKind::Connect => "connect",
            AuthorizationKind::Consent => "consent",
        }
    }
}

const AUTHZ_COLUMNS: &str = "id, user_id, provider, scopes, client_name, mcp_session, client_key, kind, grant_id, status, state_hash, browser_session_hash, pkce_verifier_sealed, failure, created_at, expires_at, updated_at";

/// What a tool call knows when it asks for a connection.
#[derive(Debug, Clone)]
pub struct NewAuthorization<'a> {
    pub id: &'a str,
    pub user_id: &'a str,
    pub provider: &'a str,
    pub scopes: &'a str,
    pub client_name: Option<&'a str>,
    pub mcp_session: Option<&'a str>,
    pub client_key: &'a str,
    pub kind: AuthorizationKind,
    /// For [`AuthorizationKind::Consent`]: the grant to allow.
    pub grant_id: Option<&'a str>,
    pub expires_at: Timestamp,
}

impl Store {
    pub async fn create_authorization(&self, new: &NewAuthorization<'_>, now: Timestamp) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO authorizations (id, user_id, provider, scopes, client_name, mcp_session, client_key, kind, grant_id, status, created_at, expires_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10, $11, $10)",
        )
        .bind(new.id)
        .bind(new.user_id)
        .bind(new.provider)
        .bind(new.scopes)
        .bind(new.client_name)
        .bind(new.mcp_session)
        .bind(new.client_key)
        .bind(new.kind.as_str())
        .bind(new.grant_id)
        .bind(now)
        .bind(new.expires_at)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    pub async fn authorization(&self, id: &str) -> StoreResult<Option<AuthorizationRow>> {
        Ok(sqlx::query_as::<_, AuthorizationRow>(&format!("SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?)
    }

    pub async fn authorization_by_state_hash(&self, state_hash: &str) -> StoreResult<Option<AuthorizationRow>> {
        Ok(sqlx::query_as::<_, AuthorizationRow>(&format!(
            "SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE state_hash = $1"
        ))
        .bind(state_hash)
        .fetch_optional(self.pool())
        .await?)
    }

    /// A still-usable pending authorization asking the same thing (user, client, kind,
    /// provider, scopes, grant) for the same session, so repeated tool calls reuse one link
    /// instead of minting a new one each time.
    pub async fn open_authorization(
        &self,
        like: &NewAuthorization<'_>,
        now: Timestamp,
    ) -> StoreResult<Option<AuthorizationRow>> {
        let rows = sqlx::query_as::<_, AuthorizationRow>(&format!(
            "SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE user_id = $1 AND provider = $2 AND scopes = $3 \
             AND client_key = $4 AND kind = $5 AND status IN ('pending', 'redirected') AND expires_at > $6 ORDER BY created_at DESC"
        ))
        .bind(like.user_id)
        .bind(like.provider)
        .bind(like.scopes)
        .bind(like.client_key)
        .bind(like.kind.as_str())
        .bind(now)
        .fetch_all(self.pool())
        .await?;
        Ok(rows
            .into_iter()
            .find(|r| r.mcp_session.as_deref() == like.mcp_session && r.grant_id.as_deref() == like.grant_id))
    }

    /// Owner approved: store the state hash, the sealed verifier and the approving browser
    /// session; only from `pending` or `redirected` (a second click re-issues the redirect).
    pub async fn mark_redirected(
        &self,
        id: &str,
        state_hash: &str,
        browser_session_hash: &str,
        pkce_verifier_sealed: &[u8],
        now: Timestamp,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE authorizations SET status = 'redirected', state_hash = $1, browser_session_hash = $2, pkce_verifier_sealed = $3, updated_at = $4 \
             WHERE id = $5 AND status IN ('pending', 'redirected') AND expires_at > $4",
        )
        .bind(state_hash)
        .bind(browser_session_hash)
        .bind(pkce_verifier_sealed)
        .bind(now)
        .bind(id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Consumes the state: `redirected` → `exchanging`, clearing the hash so it can never
    /// match again. Only one caller can win.
    pub async fn consume_state(&self, id: &str, state_hash: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE authorizations SET status = 'exchanging', state_hash = NULL, updated_at = $1 \
             WHERE id = $2 AND state_hash = $3 AND status = 'redirected' AND expires_at > $1",
        )
        .bind(now)
        .bind(id)
        .bind(state_hash)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Final states. The verifier is wiped: it is useless after the exchange.
    pub async fn finish_authorization(
        &self,
        id: &str,
        status: AuthorizationStatus,
        failure: Option<&str>,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE authorizations SET status = $1, failure = $2, pkce_verifier_sealed = NULL, state_hash = NULL, updated_at = $3 \
             WHERE id = $4 AND status NOT IN ('completed', 'declined', 'failed')",
        )
        .bind(status.as_str())
        .bind(failure)
        .bind(now)
        .bind(id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The owner said no on the consent page: only from `pending` or `redirected` and while
    /// unexpired, so a decline racing a callback that already consumed the state loses.
    pub async fn decline_authorization(&self, id: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE authorizations SET status = 'declined', pkce_verifier_sealed = NULL, state_hash = NULL, updated_at = $1 \
             WHERE id = $2 AND status IN ('pending', 'redirected') AND expires_at > $1",
        )
        .bind(now)
        .bind(id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn authorizations_for_user(&self, user_id: &str, limit: i64) -> StoreResult<Vec<AuthorizationRow>> {
        Ok(sqlx::query_as::<_, AuthorizationRow>(&format!(
            "SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE user_id = $1 ORDER BY created_at DESC LIMIT $2"
        ))
        .bind(user_id)
        .bind(limit)
        .fetch_all(self.pool())
        .await?)
    }

    pub async fn all_authorizations(&self, limit: i64) -> StoreResult<Vec<AuthorizationRow>> {
        Ok(sqlx::query_as::<_, AuthorizationRow>(&format!(
            "SELECT {AUTHZ_COLUMNS} FROM authorizations ORDER BY created_at DESC LIMIT $1"
        ))
        .bind(limit)
        .fetch_all(self.pool())
        .await?)
    }

    /// Deletes rows that ended or expired before `cutoff` (housekeeping).
    pub async fn purge_authorizations(&self, cutoff: Timestamp) -> StoreResult<u64> {
        let done =
            sqlx::query("DELETE FROM authorizations WHERE expires_at < $1").bind(cutoff).execute(self.pool()).await?;
        Ok(done.rows_affected())
    }
}
