//! Opening an authorization (the row behind a connect or consent link) and reading where one
//! stands. Every face that needs the user in the browser comes here: the MCP tools (whose
//! `elicitationId` is the row id), the token API (which hands the link to a tool server), and
//! the pages (which act on the row).

use url::Url;

use super::core::Core;
use crate::clock::Timestamp;
use crate::config::ProviderConfig;
use crate::domain::{ElicitationId, OrganizationId, Scopes};
use crate::identity::ClientIdentity;
use crate::store::StoreError;
use crate::store::authorizations::{AuthorizationKind, AuthorizationRow, AuthorizationStatus, NewAuthorization};
use crate::store::grants::GrantRow;

/// Who asks, as far as an authorization row needs to know.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    pub user_id: &'a str,
    /// The client the token was issued to (an MCP client, or a registered tool server): the
    /// user's consent is recorded for it.
    pub client: &'a ClientIdentity,
    /// A self-reported name (MCP `clientInfo`), shown as such; never an identity.
    pub client_name: Option<&'a str>,
    /// The MCP session that asked, so its completion notification goes there only.
    pub mcp_session: Option<&'a str>,
    /// A server behind the broker (its id) whose (client, server) pair the user approves with
    /// this authorization too (`gateway_consent`).
    pub server: Option<&'a str>,
    /// The organization the request acts in: a service's own. `None` (the user's own MCP
    /// client): the organization the user joined first ([`acting_organization`]).
    pub organization: Option<&'a OrganizationId>,
}

/// The organization an authorization for `who` acts in: whose app its trip to the provider
/// uses and whose name its consent page shows.
pub async fn acting_organization(core: &Core, who: &Requester<'_>) -> Result<OrganizationId, StoreError> {
    if let Some(org) = who.organization {
        return Ok(org.clone());
    }
    Ok(core.store.organizations().home_of(who.user_id).await?.unwrap_or_else(OrganizationId::default_organization))
}

/// What the user is asked to approve.
#[derive(Clone, Copy)]
pub enum Ask<'a> {
    /// Connect (or reconnect) an account at the provider.
    Connect,
    /// Let this client use an existing connection (consent per client).
    UseGrant(&'a GrantRow),
}

/// An open authorization asking the same thing for this requester (and session), reused while
/// still valid so retries do not mint a new link each time; otherwise a new one.
pub async fn open(
    core: &Core,
    who: &Requester<'_>,
    provider: &ProviderConfig,
    scopes: &Scopes,
    ask: Ask<'_>,
) -> Result<AuthorizationRow, StoreError> {
    let now = core.now();
    let id = ElicitationId::generate();
    let client_key = who.client.key();
    // A connect asks the provider for what was named plus what the provider needs to work
    // (`openid`, …), never the provider's defaults on top: a client asking for less gets less.
    let with_required;
    let (kind, grant_id, scopes) = match ask {
        Ask::Connect => {
            with_required = core.providers.required_scopes(&provider.id).union(scopes);
            (AuthorizationKind::Connect, None, &with_required)
        }
        Ask::UseGrant(grant) => (AuthorizationKind::Consent, Some(grant.id.as_str()), scopes),
    };
    let organization = acting_organization(core, who).await?;
    let new = NewAuthorization {
        id: id.as_str(),
        user_id: who.user_id,
        organization: &organization,
        provider: provider.id.as_str(),
        scopes,
        client_name: who.client_name,
        mcp_session: who.mcp_session,
        client_key: &client_key,
        kind,
        grant_id,
        server_id: who.server,
        expires_at: now + core.config.authorization_ttl.as_secs() as i64,
    };
    reuse_or_create(core, &new, now, "").await
}

/// The open authorization asking what `new` asks, reused while valid, or `new` created and
/// audited (`authorization.created`, with `extra` appended to its detail) and read back.
pub(super) async fn reuse_or_create(
    core: &Core,
    new: &NewAuthorization<'_>,
    now: Timestamp,
    extra: &str,
) -> Result<AuthorizationRow, StoreError> {
    if let Some(row) = core.store.authorizations().find_open(new, now).await? {
        return Ok(row);
    }
    core.store.authorizations().create(new, now).await?;
    let detail = format!("id={} kind={} client={}{extra}", new.id, new.kind.as_str(), new.client_key);
    core.store
        .audit()
        .record_implied(now, Some(new.user_id), "authorization.created", Some(new.provider), Some(&detail))
        .await?;
    core.store.authorizations().by_id(new.id).await?.ok_or(StoreError::Corrupt("authorization vanished".into()))
}

/// The broker's own page for an authorization: the only link ever handed out. It carries just
/// the opaque id and is useless without signing in as the row's user.
pub fn connect_url(core: &Core, authorization_id: &str) -> Url {
    core.config.url(&format!("/connect/{authorization_id}"))
}

/// Where an authorization stands, as every face reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Waiting for the user (not yet approved, or sent to the provider).
    Pending,
    Completed,
    Declined,
    /// Ended without a connection; the reason is a short code, safe to show.
    Failed(String),
    /// Not finished before its link expired.
    Expired,
}

impl Outcome {
    pub fn of(row: &AuthorizationRow, now: i64) -> Self {
        match row.status {
            AuthorizationStatus::Completed => Outcome::Completed,
            AuthorizationStatus::Declined => Outcome::Declined,
            AuthorizationStatus::Failed => Outcome::Failed(row.failure.clone().unwrap_or_else(|| "unknown".into())),
            // An exchange that outlived any exchange was abandoned (the process stopped): it
            // will never finish, whatever the row still says until it is settled.
            AuthorizationStatus::Exchanging if crate::broker::flow::exchange_interrupted(row, now) => {
                Outcome::Failed(crate::broker::flow::INTERRUPTED.into())
            }
            // `exchanging` past the expiry still finishes (the state was consumed in time).
            AuthorizationStatus::Exchanging => Outcome::Pending,
            AuthorizationStatus::Pending | AuthorizationStatus::Redirected if row.is_expired(now) => Outcome::Expired,
            AuthorizationStatus::Pending | AuthorizationStatus::Redirected => Outcome::Pending,
        }
    }

    pub fn is_final(&self) -> bool {
        !matches!(self, Outcome::Pending)
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Pending => "pending",
            Outcome::Completed => "completed",
            Outcome::Declined => "declined",
            Outcome::Failed(_) => "failed",
            Outcome::Expired => "expired",
        }
    }
}
