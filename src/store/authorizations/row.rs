//! Authorizations: one row per connect attempt (its id is the MCP `elicitationId`).
//!
//! Life of a row: `pending` (created by a tool call) → `redirected` (the owner approved; state
//! and PKCE verifier stored, browser sent to the provider) → `completed` | `failed`; or
//! `declined` (the owner said no), or expired by time. The OAuth `state` is stored only as a
//! hash, bound to this row and to the browser session that approved, and consumed with a
//! compare-and-swap so it works once.

use crate::clock::Timestamp;
use crate::domain::{OrganizationId, Scopes};
use crate::store::machinery::error::StoreError;
use crate::store::machinery::store::Store;

/// The handle on authorizations: `store.authorizations()`.
#[derive(Debug, Clone, Copy)]
pub struct Authorizations<'s> {
    pub(in crate::store) store: &'s Store,
}

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
    /// The organization it acts in: whose app the provider trip uses, whose page it is.
    pub organization: OrganizationId,
    /// The organization's app version the browser was sent to the provider with (set on
    /// approval); `None`: the operator's app, or not sent yet.
    pub app_id: Option<String>,
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
    pub(super) id: String,
    pub(super) user_id: String,
    pub(super) provider: String,
    pub(super) scopes: String,
    pub(super) client_name: Option<String>,
    pub(super) mcp_session: Option<String>,
    pub(super) client_key: String,
    pub(super) kind: String,
    pub(super) grant_id: Option<String>,
    pub(super) server_id: Option<String>,
    pub(super) status: String,
    pub(super) state_hash: Option<String>,
    pub(super) browser_session_hash: Option<String>,
    pub(super) pkce_verifier_sealed: Option<Vec<u8>>,
    pub(super) redirect_uri: Option<String>,
    pub(super) failure: Option<String>,
    pub(super) created_at: i64,
    pub(super) expires_at: i64,
    pub(super) updated_at: i64,
    pub(super) organization_id: String,
    pub(super) app_id: Option<String>,
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
            organization: OrganizationId::from_stored(raw.organization_id),
            app_id: raw.app_id,
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

pub(in crate::store) const AUTHZ_COLUMNS: &str = "id, user_id, provider, scopes, client_name, mcp_session, client_key, kind, grant_id, server_id, status, state_hash, browser_session_hash, pkce_verifier_sealed, redirect_uri, failure, created_at, expires_at, updated_at, organization_id, app_id";

/// What a tool call knows when it asks for a connection.
#[derive(Debug, Clone)]
pub struct NewAuthorization<'a> {
    pub id: &'a str,
    pub user_id: &'a str,
    /// The organization it acts in ([`AuthorizationRow::organization`]).
    pub organization: &'a OrganizationId,
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
            organization_id: "org_default".into(),
            app_id: None,
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
        let user = store.users().create_local("http://issuer", "alice", "hash", 1).await.unwrap().id;
        let scopes = Scopes::parse(["profile", "notes:read"]).unwrap();
        let new = NewAuthorization {
            id: "a1",
            user_id: &user,
            organization: &crate::domain::OrganizationId::default_organization(),
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
        store.authorizations().create(&new, 10).await.unwrap();

        let row = store.authorizations().by_id("a1").await.unwrap().unwrap();
        assert_eq!(row.server_id.as_deref(), Some("srv1"));
        let for_another_server = NewAuthorization { server_id: None, ..new.clone() };
        assert!(
            store.authorizations().find_open(&for_another_server, 11).await.unwrap().is_none(),
            "another server asks anew"
        );
        assert_eq!(
            (row.status, row.kind, &row.scopes),
            (AuthorizationStatus::Pending, AuthorizationKind::Consent, &scopes)
        );
        let reused =
            store.authorizations().find_open(&new, 11).await.unwrap().expect("the same ask finds the open row");
        assert_eq!(reused.id, "a1");
        let stored: (String, String, String) =
            sqlx::query_as("SELECT scopes, kind, status FROM authorizations WHERE id = 'a1'")
                .fetch_one(store.pool())
                .await
                .unwrap();
        assert_eq!(stored, ("notes:read profile".into(), "consent".into(), "pending".into()));

        assert!(store.authorizations().finish("a1", AuthorizationStatus::Completed, None, 12).await.unwrap());
        assert_eq!(store.authorizations().by_id("a1").await.unwrap().unwrap().status, AuthorizationStatus::Completed);
        sqlx::query("UPDATE authorizations SET kind = 'other' WHERE id = 'a1'").execute(store.pool()).await.unwrap();
        assert!(matches!(store.authorizations().by_id("a1").await, Err(StoreError::Corrupt(_))));
        assert!(matches!(store.authorizations().all(10).await, Err(StoreError::Corrupt(_))));
    }
}
