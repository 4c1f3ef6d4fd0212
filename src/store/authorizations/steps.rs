//! An authorization's steps, each a compare-and-swap on its status: created by a tool call,
//! redirected when the owner approves, its state consumed by the callback, finished; or
//! declined, expired by an admin, purged once over.

use crate::clock::Timestamp;
use crate::store::authorizations::row::AUTHZ_COLUMNS;
use crate::store::authorizations::row::AuthorizationRow;
use crate::store::authorizations::row::AuthorizationStatus;
use crate::store::authorizations::row::Authorizations;
use crate::store::authorizations::row::NewAuthorization;
use crate::store::authorizations::row::RawAuthorizationRow;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::transaction::Transaction;
use crate::store::machinery::write::{On, Write, Written};

/// What an approval sent the browser to the provider with ([`Authorizations::mark_redirected`]).
#[derive(Debug, Clone, Copy)]
pub struct SentToProvider<'a> {
    pub state_hash: &'a str,
    pub browser_session_hash: &'a str,
    pub pkce_verifier_sealed: &'a [u8],
    pub redirect_uri: &'a str,
    /// The organization's app version; `None`: the operator's app.
    pub app_id: Option<&'a str>,
}

/// [`Authorizations::decline`].
pub struct DeclineAuthorization<'a> {
    id: &'a str,
    now: Timestamp,
}

impl Write for DeclineAuthorization<'_> {
    type Done = bool;

    async fn run(&self, on: On<'_, '_>) -> StoreResult<bool> {
        let decline = sqlx::query(
            "UPDATE authorizations SET status = 'declined', pkce_verifier_sealed = NULL, state_hash = NULL, updated_at = $1 \
             WHERE id = $2 AND status IN ('pending', 'redirected') AND expires_at > $1",
        )
        .bind(self.now)
        .bind(self.id);
        Ok(on.execute(CacheEffect::Nothing, decline).await?.rows_affected() == 1)
    }

    fn applied(done: &bool) -> bool {
        *done
    }
}

impl<'s> Authorizations<'s> {
    pub async fn create(self, new: &NewAuthorization<'_>, now: Timestamp) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO authorizations (id, user_id, provider, scopes, client_name, mcp_session, client_key, kind, grant_id, server_id, status, created_at, expires_at, updated_at, organization_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $12, 'pending', $10, $11, $10, $13)",
        )
        .bind(new.id)
        .bind(new.user_id)
        .bind(new.provider)
        .bind(new.scopes.to_space_separated())
        .bind(new.client_name)
        .bind(new.mcp_session)
        .bind(new.client_key)
        .bind(new.kind.as_str())
        .bind(new.grant_id)
        .bind(now)
        .bind(new.expires_at)
        .bind(new.server_id)
        .bind(new.organization.as_str())
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok(())
    }

    pub async fn by_id(self, id: &str) -> StoreResult<Option<AuthorizationRow>> {
        sqlx::query_as::<_, RawAuthorizationRow>(&format!("SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE id = $1"))
            .bind(id)
            .fetch_optional_in(self.store.read())
            .await?
            .map(AuthorizationRow::try_from)
            .transpose()
    }

    pub async fn by_state_hash(self, state_hash: &str) -> StoreResult<Option<AuthorizationRow>> {
        sqlx::query_as::<_, RawAuthorizationRow>(&format!(
            "SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE state_hash = $1"
        ))
        .bind(state_hash)
        .fetch_optional_in(self.store.read())
        .await?
        .map(AuthorizationRow::try_from)
        .transpose()
    }

    /// A still-usable pending authorization asking the same thing (user, client, kind,
    /// provider, scopes, grant) for the same session, so repeated tool calls reuse one link
    /// instead of minting a new one each time.
    pub async fn find_open(self, like: &NewAuthorization<'_>, now: Timestamp) -> StoreResult<Option<AuthorizationRow>> {
        let rows = sqlx::query_as::<_, RawAuthorizationRow>(&format!(
            "SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE user_id = $1 AND provider = $2 AND scopes = $3 \
             AND client_key = $4 AND kind = $5 AND status IN ('pending', 'redirected') AND expires_at > $6 AND organization_id = $7 \
             ORDER BY created_at DESC"
        ))
        .bind(like.user_id)
        .bind(like.provider)
        .bind(like.scopes.to_space_separated())
        .bind(like.client_key)
        .bind(like.kind.as_str())
        .bind(now)
        .bind(like.organization.as_str())
        .fetch_all_in(self.store.read())
        .await?;
        rows.into_iter()
            .find(|r| {
                r.mcp_session.as_deref() == like.mcp_session
                    && r.grant_id.as_deref() == like.grant_id
                    && r.server_id.as_deref() == like.server_id
            })
            .map(AuthorizationRow::try_from)
            .transpose()
    }

    /// Owner approved: store the state hash, the sealed verifier, the approving browser
    /// session and the app the browser goes to the provider with; only from `pending` or
    /// `redirected` (a second click re-issues the redirect).
    pub async fn mark_redirected(self, id: &str, sent: &SentToProvider<'_>, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE authorizations SET status = 'redirected', state_hash = $1, browser_session_hash = $2, pkce_verifier_sealed = $3, updated_at = $4, redirect_uri = $6, app_id = $7 \
             WHERE id = $5 AND status IN ('pending', 'redirected') AND expires_at > $4",
        )
        .bind(sent.state_hash)
        .bind(sent.browser_session_hash)
        .bind(sent.pkce_verifier_sealed)
        .bind(now)
        .bind(id)
        .bind(sent.redirect_uri)
        .bind(sent.app_id)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Consumes the state: `redirected` → `exchanging`. Only one caller can win: the status
    /// moves on, so the hash can never be consumed again. The hash stays until the row is final,
    /// so a reload of the callback during (or after an interrupted) exchange still finds its row
    /// and can say what happened instead of "unknown state".
    pub async fn consume_state(self, id: &str, state_hash: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE authorizations SET status = 'exchanging', updated_at = $1 \
             WHERE id = $2 AND state_hash = $3 AND status = 'redirected' AND expires_at > $1",
        )
        .bind(now)
        .bind(id)
        .bind(state_hash)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Final states. The verifier is wiped: it is useless after the exchange.
    pub async fn finish(
        self,
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
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The owner said no on the consent page: only from `pending` or `redirected` and while
    /// unexpired, so a decline racing a callback that already consumed the state loses. True
    /// when it applied.
    pub fn decline(self, id: &'s str, now: Timestamp) -> Written<'s, DeclineAuthorization<'s>> {
        Written::new(self.store, DeclineAuthorization { id, now })
    }

    /// An admin ends an open attempt (`/admin/authorizations`): it expires now and its state
    /// and verifier are wiped, so a late callback finds nothing to complete. False if it was
    /// not open (finished, already expired, or unknown).
    pub async fn expire(self, id: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE authorizations SET expires_at = $1, pkce_verifier_sealed = NULL, state_hash = NULL, updated_at = $1 \
             WHERE id = $2 AND status IN ('pending', 'redirected') AND expires_at > $1",
        )
        .bind(now)
        .bind(id)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn for_user(self, user_id: &str, limit: i64) -> StoreResult<Vec<AuthorizationRow>> {
        sqlx::query_as::<_, RawAuthorizationRow>(&format!(
            "SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE user_id = $1 ORDER BY created_at DESC LIMIT $2"
        ))
        .bind(user_id)
        .bind(limit)
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(AuthorizationRow::try_from)
        .collect()
    }

    pub async fn all(self, limit: i64) -> StoreResult<Vec<AuthorizationRow>> {
        sqlx::query_as::<_, RawAuthorizationRow>(&format!(
            "SELECT {AUTHZ_COLUMNS} FROM authorizations ORDER BY created_at DESC LIMIT $1"
        ))
        .bind(limit)
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(AuthorizationRow::try_from)
        .collect()
    }

    /// Rows left in `exchanging` since before `before`: an exchange that started then and never
    /// finished (the process stopped mid-exchange), so nobody else will ever settle them.
    pub async fn stale_exchanges(self, before: Timestamp) -> StoreResult<Vec<AuthorizationRow>> {
        sqlx::query_as::<_, RawAuthorizationRow>(&format!(
            "SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE status = 'exchanging' AND updated_at < $1"
        ))
        .bind(before)
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(AuthorizationRow::try_from)
        .collect()
    }

    /// Deletes rows that ended or expired before `cutoff` (housekeeping).
    pub async fn purge(self, cutoff: Timestamp) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM authorizations WHERE expires_at < $1")
            .bind(cutoff)
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        Ok(done.rows_affected())
    }
}

impl Authorizations<'_> {
    /// Fails every unfinished authorization of the client `client_key` with `failure`, within
    /// `tx` (the client is being removed): their completion is a compare-and-swap on the status,
    /// so none can record a consent for the removed client afterwards. How many.
    pub(in crate::store) async fn fail_open_of_client(
        self,
        tx: &mut Transaction<'_>,
        client_key: &str,
        failure: &str,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let fail = sqlx::query(
            "UPDATE authorizations SET status = 'failed', failure = $3, pkce_verifier_sealed = NULL, \
             state_hash = NULL, updated_at = $1 WHERE client_key = $2 AND status NOT IN ('completed', 'declined', 'failed')",
        )
        .bind(now)
        .bind(client_key)
        .bind(failure);
        Ok(On::Within(tx).execute(CacheEffect::Nothing, fail).await?.rows_affected())
    }
}
