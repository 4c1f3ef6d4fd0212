//! What finishing an authorization that carries a server behind the broker records besides:
//! the (client, server) approval, written in the same transaction that
//! completes the row, and its audit entry. Asking for and withdrawing approvals is
//! [`super::gateway_consent`]'s; this is the part the connect and consent flows share with it.

use super::core::Core;
use crate::store::StoreError;
use crate::store::authorizations::AuthorizationRow;
use crate::store::gateway::NewGatewayConsent;

/// What a `server` row holds in its `provider` column: `server:` and the server's registered
/// name (no provider id has a colon, so it is never mistaken for one).
pub(super) const SERVER_PREFIX: &str = "server:";

/// The registered name of the server a `server` row is about (as it was when the row was made).
pub fn server_named(row: &AuthorizationRow) -> &str {
    row.provider.strip_prefix(SERVER_PREFIX).unwrap_or(&row.provider)
}

/// The approval that finishing `row` records too, if it carries a server.
pub fn pair_of<'a>(row: &'a AuthorizationRow, client_name: Option<&'a str>) -> Option<NewGatewayConsent<'a>> {
    let server_id = row.server_id.as_deref()?;
    if row.client_key.is_empty() {
        return None;
    }
    Some(NewGatewayConsent { user_id: &row.user_id, client_key: &row.client_key, server_id, client_name })
}

/// Audits an approval recorded with `row` (`gateway.consent.granted`).
pub async fn audit_granted(core: &Core, row: &AuthorizationRow) -> Result<(), StoreError> {
    let Some(server_id) = row.server_id.as_deref() else { return Ok(()) };
    let detail = format!("id={} client={} server_id={server_id}", row.id, row.client_key);
    core.store
        .audit()
        .record_implied(core.now(), Some(&row.user_id), "gateway.consent.granted", None, Some(&detail))
        .await
}
