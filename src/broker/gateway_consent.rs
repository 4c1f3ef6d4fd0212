//! The user approves each (client, server) pair: a client the user connected
//! may call a server behind the broker only once the user approved that client for that server,
//! on the broker's own consent pages — whatever the server's auth kind, `none` included.
//!
//! An approval is asked for with an authorization like any other link: a `server` row when
//! nothing else is missing, or the `connect` / `consent` row the server's credential needs
//! anyway, carrying the server (`server_id`), so one visit approves the pair and connects. The
//! approval is recorded in the same transaction that completes the row, so a waiting call that
//! sees the row completed finds the pair approved. The page names the server by its registered
//! name, never by anything the server says about itself.

use super::authorizations::Requester;
use super::core::Core;
use super::flow::{FlowError, check_consent, publish};
pub use super::pair_approval::server_named;
use super::pair_approval::{SERVER_PREFIX, audit_granted, pair_of};
use crate::domain::{ElicitationId, Scopes};
use crate::identity::ClientIdentity;
use crate::identity::browser::BrowserSession;
use crate::store::StoreError;
use crate::store::authorizations::PairOutcome;
use crate::store::authorizations::{AuthorizationKind, AuthorizationRow, NewAuthorization};

/// Whether the user approved `client` for server `server_id`.
pub async fn approved(
    core: &Core,
    user_id: &str,
    client: &ClientIdentity,
    server_id: &str,
) -> Result<bool, StoreError> {
    core.store.gateway_consents().approved(user_id, &client.key(), server_id).await
}

/// An open `server` authorization asking the user to approve the requester's client for the
/// server `server_id` (registered as `server_name`), reused while one is open.
pub async fn open(
    core: &Core,
    who: &Requester<'_>,
    server_id: &str,
    server_name: &str,
) -> Result<AuthorizationRow, StoreError> {
    let now = core.now();
    let id = ElicitationId::generate();
    let client_key = who.client.key();
    let provider = format!("{SERVER_PREFIX}{server_name}");
    let organization = super::authorizations::acting_organization(core, who).await?;
    let new = NewAuthorization {
        id: id.as_str(),
        user_id: who.user_id,
        organization: &organization,
        provider: &provider,
        scopes: &Scopes::default(),
        client_name: who.client_name,
        mcp_session: who.mcp_session,
        client_key: &client_key,
        kind: AuthorizationKind::Server,
        grant_id: None,
        server_id: Some(server_id),
        expires_at: now + core.config.authorization_ttl.as_secs() as i64,
    };
    super::authorizations::reuse_or_create(core, &new, now, &format!(" server={server_name}")).await
}

/// The owner approved a `server` row on its page: the row's client may now call the server.
/// The row and the approval change together, or not at all.
pub async fn approve(core: &Core, row: &AuthorizationRow, session: &BrowserSession) -> Result<(), FlowError> {
    check_consent(core, row, session)?;
    if row.kind != AuthorizationKind::Server {
        return Err(FlowError::NotActionable);
    }
    let client = ClientIdentity::from_key(&row.client_key);
    let name = super::consent::client_name(core, &client).await.to_string();
    let pair = pair_of(row, Some(&name)).ok_or(FlowError::NotActionable)?;
    match core.store.authorizations().approve_gateway_pair(&row.id, &pair, core.now()).await? {
        PairOutcome::Approved => {}
        PairOutcome::NotPending => return Err(FlowError::NotActionable),
        PairOutcome::ServerGone => return Err(FlowError::ServerGone),
    }
    audit_granted(core, row).await?;
    tracing::info!(authorization_id = %row.id, server = server_named(row), "client approved for a server behind the broker");
    publish(core, row, "completed");
    Ok(())
}

/// The user withdrew an approval (on `/connections`): the client's next call asks again.
/// False if there was none.
pub async fn withdraw(core: &Core, user_id: &str, client_key: &str, server_id: &str) -> Result<bool, StoreError> {
    let withdrawn = core.store.gateway_consents().withdraw(user_id, client_key, server_id).await?;
    if withdrawn {
        let detail = format!("client={client_key} server_id={server_id}");
        core.store
            .audit()
            .record_implied(core.now(), Some(user_id), "gateway.consent.withdrawn", None, Some(&detail))
            .await?;
    }
    Ok(withdrawn)
}
