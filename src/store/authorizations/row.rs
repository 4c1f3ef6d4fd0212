//! Authorizations: one row per connect attempt (its id is the MCP `elicitationId`).
//!
//! Life of a row: `pending` (created by a tool call) → `redirected` (the owner approved; state
//! and PKCE verifier stored, browser sent to the provider) → `completed` | `failed`; or
//! `declined` (the owner said no), or expired by time. The OAuth `state` is stored only as a
//! hash, bound to this row and to the browser session that approved, and consumed with a
//! compare-and-swap so it works once.

use crate::clock::Timestamp;
use crate::domain::Scopes;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::paging::{Chosen, Cursor, ListSql, Paged, Search, Window};
use crate::store::machinery::search::{Indexed, TextIndex};
use crate::store::machinery::store::Store;
use crate::store::machinery::write::{On, Write, Written};
use crate::store::users::accounts::BY_USER_NAME;

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

impl std::fmt::Display for AuthorizationStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, not `write_str`: the admin tables align these with `{:<16}`.
        f.pad(self.as_str())
    }
}

/// Serialises as the stored string, so JSON shows what it showed when the field was text.
impl serde::Serialize for AuthorizationStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// An authorization as the rest of the broker sees it: status, kind and scopes parsed once, here.
#[derive(Clone)]
pub struct AuthorizationRow {
    pub id: String,
    pub user_id: String,
    pub provider: String,
    /// Space separated in the column.
    pub scopes: Scopes,
    pub client_name: Option<String>,
    pub mcp_session: Option<String>,
    /// The client the authorization is for ([`crate::domain::ClientIdentity::key`]); '' on
    /// rows from before consents were per client.
    pub client_key: String,
    pub kind: AuthorizationKind,
    /// For `consent` rows: the grant the client asks to use.
    pub grant_id: Option<String>,
    /// The server behind the broker whose (client, server) pair finishing this row approves
    /// too (always set on `server` rows).
    pub server_id: Option<String>,
    pub status: AuthorizationStatus,
    pub state_hash: Option<String>,
    pub browser_session_hash: Option<String>,
    pub pkce_verifier_sealed: Option<Vec<u8>>,
    /// The redirect URI the browser was sent to the provider with; `None` on rows redirected
    /// before each provider had its own (they used the shared `/oauth/callback`).
    pub redirect_uri: Option<String>,
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
            .field("kind", &self.kind)
            .field("status", &self.status)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

impl AuthorizationRow {
    pub fn is_expired(&self, now: Timestamp) -> bool {
        now >= self.expires_at
    }

    /// The status as people read it: an open attempt past its expiry (or one an admin
    /// expired) is `expired`, on the pages and in the CLI alike.
    pub fn shown_status(&self, now: Timestamp) -> &'static str {
        match self.status {
            AuthorizationStatus::Pending | AuthorizationStatus::Redirected | AuthorizationStatus::Exchanging
                if self.is_expired(now) =>
            {
                "expired"
            }
            status => status.as_str(),
        }
    }
}

/// The row as stored; read only through [`AuthorizationRow::try_from`].
#[derive(sqlx::FromRow)]
pub(in crate::store) struct RawAuthorizationRow {
    id: String,
    user_id: String,
    provider: String,
    scopes: String,
    client_name: Option<String>,
    mcp_session: Option<String>,
    client_key: String,
    kind: String,
    grant_id: Option<String>,
    server_id: Option<String>,
    status: String,
    state_hash: Option<String>,
    browser_session_hash: Option<String>,
    pkce_verifier_sealed: Option<Vec<u8>>,
    redirect_uri: Option<String>,
    failure: Option<String>,
    created_at: i64,
    expires_at: i64,
    updated_at: i64,
}

impl TryFrom<RawAuthorizationRow> for AuthorizationRow {
    type Error = StoreError;

    fn try_from(raw: RawAuthorizationRow) -> Result<Self, Self::Error> {
        let corrupt = |what: String| StoreError::Corrupt(format!("authorization {:?} has {what}", raw.id));
        let status = AuthorizationStatus::parse(&raw.status)
            .ok_or_else(|| corrupt(format!("unknown status {:?}", raw.status)))?;
        let kind =
            AuthorizationKind::parse(&raw.kind).ok_or_else(|| corrupt(format!("unknown kind {:?}", raw.kind)))?;
        let scopes = Scopes::from_space_separated(&raw.scopes).map_err(|e| corrupt(e.to_string()))?;
        Ok(AuthorizationRow {
            id: raw.id,
            user_id: raw.user_id,
            provider: raw.provider,
            scopes,
            client_name: raw.client_name,
            mcp_session: raw.mcp_session,
            client_key: raw.client_key,
            kind,
            grant_id: raw.grant_id,
            server_id: raw.server_id,
            status,
            state_hash: raw.state_hash,
            browser_session_hash: raw.browser_session_hash,
            pkce_verifier_sealed: raw.pkce_verifier_sealed,
            redirect_uri: raw.redirect_uri,
            failure: raw.failure,
            created_at: raw.created_at,
            expires_at: raw.expires_at,
            updated_at: raw.updated_at,
        })
    }
}

/// What approving an authorization does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationKind {
    /// Runs the provider's OAuth flow; the new or updated grant is then allowed for the client.
    Connect,
    /// Only lets the client use an existing grant (`grant_id`): no trip to the provider.
    Consent,
    /// Only lets the client call a server behind the broker (`server_id`): no provider, no
    /// grant.
    Server,
}

impl AuthorizationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthorizationKind::Connect => "connect",
            AuthorizationKind::Consent => "consent",
            AuthorizationKind::Server => "server",
        }
    }

    /// The kind stored as `value`, `None` for anything else.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "connect" => Some(AuthorizationKind::Connect),
            "consent" => Some(AuthorizationKind::Consent),
            "server" => Some(AuthorizationKind::Server),
            _ => None,
        }
    }
}

impl std::fmt::Display for AuthorizationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, not `write_str`: the admin tables align these with `{:<16}`.
        f.pad(self.as_str())
    }
}

/// Serialises as the stored string, so JSON shows what it showed when the field was text.
impl serde::Serialize for AuthorizationKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

pub(in crate::store) const AUTHZ_COLUMNS: &str = "id, user_id, provider, scopes, client_name, mcp_session, client_key, kind, grant_id, server_id, status, state_hash, browser_session_hash, pkce_verifier_sealed, redirect_uri, failure, created_at, expires_at, updated_at";

/// What a tool call knows when it asks for a connection.
#[derive(Debug, Clone)]
pub struct NewAuthorization<'a> {
    pub id: &'a str,
    pub user_id: &'a str,
    pub provider: &'a str,
    pub scopes: &'a Scopes,
    pub client_name: Option<&'a str>,
    pub mcp_session: Option<&'a str>,
    pub client_key: &'a str,
    pub kind: AuthorizationKind,
    /// For [`AuthorizationKind::Consent`]: the grant to allow.
    pub grant_id: Option<&'a str>,
    /// The server whose (client, server) pair the row approves too.
    pub server_id: Option<&'a str>,
    pub expires_at: Timestamp,
}

/// [`Store::decline_authorization`].
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

impl Store {
    pub async fn create_authorization(&self, new: &NewAuthorization<'_>, now: Timestamp) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO authorizations (id, user_id, provider, scopes, client_name, mcp_session, client_key, kind, grant_id, server_id, status, created_at, expires_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $12, 'pending', $10, $11, $10)",
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
        .execute(self.write(CacheEffect::Nothing))
        .await?;
        Ok(())
    }

    pub async fn authorization(&self, id: &str) -> StoreResult<Option<AuthorizationRow>> {
        sqlx::query_as::<_, RawAuthorizationRow>(&format!("SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE id = $1"))
            .bind(id)
            .fetch_optional_in(self.read())
            .await?
            .map(AuthorizationRow::try_from)
            .transpose()
    }

    pub async fn authorization_by_state_hash(&self, state_hash: &str) -> StoreResult<Option<AuthorizationRow>> {
        sqlx::query_as::<_, RawAuthorizationRow>(&format!(
            "SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE state_hash = $1"
        ))
        .bind(state_hash)
        .fetch_optional_in(self.read())
        .await?
        .map(AuthorizationRow::try_from)
        .transpose()
    }

    /// A still-usable pending authorization asking the same thing (user, client, kind,
    /// provider, scopes, grant) for the same session, so repeated tool calls reuse one link
    /// instead of minting a new one each time.
    pub async fn open_authorization(
        &self,
        like: &NewAuthorization<'_>,
        now: Timestamp,
    ) -> StoreResult<Option<AuthorizationRow>> {
        let rows = sqlx::query_as::<_, RawAuthorizationRow>(&format!(
            "SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE user_id = $1 AND provider = $2 AND scopes = $3 \
             AND client_key = $4 AND kind = $5 AND status IN ('pending', 'redirected') AND expires_at > $6 ORDER BY created_at DESC"
        ))
        .bind(like.user_id)
        .bind(like.provider)
        .bind(like.scopes.to_space_separated())
        .bind(like.client_key)
        .bind(like.kind.as_str())
        .bind(now).fetch_all_in(self.read())
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

    /// Owner approved: store the state hash, the sealed verifier and the approving browser
    /// session; only from `pending` or `redirected` (a second click re-issues the redirect).
    pub async fn mark_redirected(
        &self,
        id: &str,
        state_hash: &str,
        browser_session_hash: &str,
        pkce_verifier_sealed: &[u8],
        redirect_uri: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE authorizations SET status = 'redirected', state_hash = $1, browser_session_hash = $2, pkce_verifier_sealed = $3, updated_at = $4, redirect_uri = $6 \
             WHERE id = $5 AND status IN ('pending', 'redirected') AND expires_at > $4",
        )
        .bind(state_hash)
        .bind(browser_session_hash)
        .bind(pkce_verifier_sealed)
        .bind(now)
        .bind(id)
        .bind(redirect_uri)
        .execute(self.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Consumes the state: `redirected` → `exchanging`. Only one caller can win: the status
    /// moves on, so the hash can never be consumed again. The hash stays until the row is final,
    /// so a reload of the callback during (or after an interrupted) exchange still finds its row
    /// and can say what happened instead of "unknown state".
    pub async fn consume_state(&self, id: &str, state_hash: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE authorizations SET status = 'exchanging', updated_at = $1 \
             WHERE id = $2 AND state_hash = $3 AND status = 'redirected' AND expires_at > $1",
        )
        .bind(now)
        .bind(id)
        .bind(state_hash)
        .execute(self.write(CacheEffect::Nothing))
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
        .execute(self.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The owner said no on the consent page: only from `pending` or `redirected` and while
    /// unexpired, so a decline racing a callback that already consumed the state loses. True
    /// when it applied.
    pub fn decline_authorization<'a>(&'a self, id: &'a str, now: Timestamp) -> Written<'a, DeclineAuthorization<'a>> {
        Written::new(self, DeclineAuthorization { id, now })
    }

    /// An admin ends an open attempt (`/admin/authorizations`): it expires now and its state
    /// and verifier are wiped, so a late callback finds nothing to complete. False if it was
    /// not open (finished, already expired, or unknown).
    pub async fn expire_authorization(&self, id: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE authorizations SET expires_at = $1, pkce_verifier_sealed = NULL, state_hash = NULL, updated_at = $1 \
             WHERE id = $2 AND status IN ('pending', 'redirected') AND expires_at > $1",
        )
        .bind(now)
        .bind(id)
        .execute(self.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn authorizations_for_user(&self, user_id: &str, limit: i64) -> StoreResult<Vec<AuthorizationRow>> {
        sqlx::query_as::<_, RawAuthorizationRow>(&format!(
            "SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE user_id = $1 ORDER BY created_at DESC LIMIT $2"
        ))
        .bind(user_id)
        .bind(limit)
        .fetch_all_in(self.read())
        .await?
        .into_iter()
        .map(AuthorizationRow::try_from)
        .collect()
    }

    pub async fn all_authorizations(&self, limit: i64) -> StoreResult<Vec<AuthorizationRow>> {
        sqlx::query_as::<_, RawAuthorizationRow>(&format!(
            "SELECT {AUTHZ_COLUMNS} FROM authorizations ORDER BY created_at DESC LIMIT $1"
        ))
        .bind(limit)
        .fetch_all_in(self.read())
        .await?
        .into_iter()
        .map(AuthorizationRow::try_from)
        .collect()
    }

    /// Rows left in `exchanging` since before `before`: an exchange that started then and never
    /// finished (the process stopped mid-exchange), so nobody else will ever settle them.
    pub async fn stale_exchanges(&self, before: Timestamp) -> StoreResult<Vec<AuthorizationRow>> {
        sqlx::query_as::<_, RawAuthorizationRow>(&format!(
            "SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE status = 'exchanging' AND updated_at < $1"
        ))
        .bind(before)
        .fetch_all_in(self.read())
        .await?
        .into_iter()
        .map(AuthorizationRow::try_from)
        .collect()
    }

    /// Deletes rows that ended or expired before `cutoff` (housekeeping).
    pub async fn purge_authorizations(&self, cutoff: Timestamp) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM authorizations WHERE expires_at < $1")
            .bind(cutoff)
            .execute(self.write(CacheEffect::Nothing))
            .await?;
        Ok(done.rows_affected())
    }
}

/// What the admin authorizations list searches besides the shown status and the user's name
/// (see `search`).
const AUTHORIZATION_TEXT: TextIndex = TextIndex {
    table: "authorizations",
    text: "LOWER(provider || ' ' || kind || ' ' || COALESCE(client_name, '') || ' ' || client_key || ' ' || scopes || ' ' || COALESCE(failure, '') || ' ' || id)",
    fts: "authorizations_search",
    column: "text",
    partial: None,
};

/// Each status as the list shows it at `{now}` ([`AuthorizationRow::shown_status`]: an open
/// attempt past its expiry reads `expired`), as fixed SQL served by the status indexes.
pub(in crate::store) const SHOWN_STATUSES: [(&str, &str); 7] = [
    ("pending", "(status = 'pending' AND expires_at > {now})"),
    ("redirected", "(status = 'redirected' AND expires_at > {now})"),
    ("exchanging", "(status = 'exchanging' AND expires_at > {now})"),
    ("completed", "status = 'completed'"),
    ("declined", "status = 'declined'"),
    ("failed", "status = 'failed'"),
    ("expired", "(status IN ('pending', 'redirected', 'exchanging') AND expires_at <= {now})"),
];

/// `expired` as a filter: the open statuses past their expiry, one condition per status so
/// each is an ordered read of `authorizations_status_created` (`store::paging::Chosen`).
pub(in crate::store) const EXPIRED_ARMS: [&str; 3] = [
    "(status = 'pending' AND expires_at <= {now})",
    "(status = 'redirected' AND expires_at <= {now})",
    "(status = 'exchanging' AND expires_at <= {now})",
];

/// The rows whose shown status contains `term`.
fn shown_status_matches(term: &str) -> Vec<&'static str> {
    SHOWN_STATUSES.iter().filter(|(word, _)| word.contains(term)).map(|(_, sql)| *sql).collect()
}

impl Store {
    /// One page of authorizations matching `search` at `now`, newest first, of those
    /// `chosen` admits (a shown status: `store::console_lists`).
    pub(in crate::store) async fn page_authorizations_with(
        &self,
        search: &Search,
        chosen: Option<Chosen>,
        now: Timestamp,
        window: Window,
    ) -> StoreResult<Paged<AuthorizationRow>> {
        let extra = shown_status_matches(search.term().unwrap_or_default());
        let sql = ListSql {
            columns: AUTHZ_COLUMNS,
            from: "authorizations",
            filter: "",
            indexed: Some(Indexed { own: AUTHORIZATION_TEXT, via: &[BY_USER_NAME], extra }),
            chosen,
            order: "created_at DESC, id DESC",
            after: "(created_at, id) < ({k}, {i})",
        };
        let key = |a: &RawAuthorizationRow| Cursor::new(a.created_at, a.id.clone());
        self.paged(sql, search, Some(now), window, key).await?.try_map(AuthorizationRow::try_from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(status: &str, kind: &str, scopes: &str) -> RawAuthorizationRow {
        RawAuthorizationRow {
            id: "a1".into(),
            user_id: "u1".into(),
            provider: "demo".into(),
            scopes: scopes.into(),
            client_name: None,
            mcp_session: None,
            client_key: String::new(),
            kind: kind.into(),
            grant_id: None,
            server_id: None,
            status: status.into(),
            state_hash: None,
            browser_session_hash: None,
            pkce_verifier_sealed: None,
            redirect_uri: None,
            failure: None,
            created_at: 1,
            expires_at: 2,
            updated_at: 1,
        }
    }

    #[test]
    fn a_stored_row_becomes_a_typed_authorization() {
        let row = AuthorizationRow::try_from(raw("redirected", "consent", "profile notes:read")).unwrap();
        assert_eq!((row.status, row.kind), (AuthorizationStatus::Redirected, AuthorizationKind::Consent));
        assert_eq!(row.scopes, Scopes::parse(["notes:read", "profile"]).unwrap());
    }

    #[test]
    fn an_unknown_status_or_kind_or_a_malformed_scope_is_corrupt() {
        let bad = [
            raw("expired", "connect", "profile"),
            raw("pending", "", "profile"),
            raw("pending", "Consent", "profile"),
            raw("pending", "connect", "pro\\file"),
        ];
        for row in bad {
            assert!(matches!(AuthorizationRow::try_from(row), Err(StoreError::Corrupt(_))));
        }
    }

    #[test]
    fn statuses_and_kinds_read_back_what_they_write() {
        use AuthorizationStatus::*;
        for status in [Pending, Redirected, Exchanging, Completed, Declined, Failed] {
            assert_eq!(AuthorizationStatus::parse(status.as_str()), Some(status));
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
        for kind in [AuthorizationKind::Connect, AuthorizationKind::Consent] {
            assert_eq!(AuthorizationKind::parse(kind.as_str()), Some(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
            assert_eq!(format!("{kind:<8}|"), format!("{:<8}|", kind.as_str()));
        }
    }

    #[tokio::test]
    async fn an_authorization_round_trips_through_sqlite_as_typed_values() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}/t.db?mode=rwc", dir.path().display())).await.unwrap();
        store.migrate().await.unwrap();
        let user = store.create_local_user("http://issuer", "alice", "hash", 1).await.unwrap().id;
        let scopes = Scopes::parse(["profile", "notes:read"]).unwrap();
        let new = NewAuthorization {
            id: "a1",
            user_id: &user,
            provider: "demo",
            scopes: &scopes,
            client_name: None,
            mcp_session: Some("s1"),
            client_key: "token:t",
            kind: AuthorizationKind::Consent,
            grant_id: Some("g1"),
            server_id: Some("srv1"),
            expires_at: 100,
        };
        store.create_authorization(&new, 10).await.unwrap();

        let row = store.authorization("a1").await.unwrap().unwrap();
        assert_eq!(row.server_id.as_deref(), Some("srv1"));
        let for_another_server = NewAuthorization { server_id: None, ..new.clone() };
        assert!(store.open_authorization(&for_another_server, 11).await.unwrap().is_none(), "another server asks anew");
        assert_eq!(
            (row.status, row.kind, &row.scopes),
            (AuthorizationStatus::Pending, AuthorizationKind::Consent, &scopes)
        );
        let reused = store.open_authorization(&new, 11).await.unwrap().expect("the same ask finds the open row");
        assert_eq!(reused.id, "a1");
        let stored: (String, String, String) =
            sqlx::query_as("SELECT scopes, kind, status FROM authorizations WHERE id = 'a1'")
                .fetch_one(store.pool())
                .await
                .unwrap();
        assert_eq!(stored, ("notes:read profile".into(), "consent".into(), "pending".into()));

        assert!(store.finish_authorization("a1", AuthorizationStatus::Completed, None, 12).await.unwrap());
        assert_eq!(store.authorization("a1").await.unwrap().unwrap().status, AuthorizationStatus::Completed);
        sqlx::query("UPDATE authorizations SET kind = 'other' WHERE id = 'a1'").execute(store.pool()).await.unwrap();
        assert!(matches!(store.authorization("a1").await, Err(StoreError::Corrupt(_))));
        assert!(matches!(store.all_authorizations(10).await, Err(StoreError::Corrupt(_))));
    }
}
