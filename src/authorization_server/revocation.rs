//! Token revocation (RFC 7009), at `POST /revoke`: a client signing out tells us it no longer
//! needs its tokens. The client authenticates as at `/token`.
//!
//! A refresh token, or an access token (one of our JWTs, still valid), revokes the delegation it
//! descends from, so every token of that approval stops working at once (the /mcp bearer check
//! asks about the delegation). A token that is unknown, expired, malformed or another client's is
//! left alone and answered 200 like a success (RFC 7009 §2.2: an invalid token is not an
//! error), so the endpoint tells a caller nothing about tokens it does not hold. The user's
//! consents are not touched: signing out is not forgetting what the user allowed.

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::Response;

use super::client_verification::{self, REALM};
use super::local_mode::LocalMode;
use crate::crypto::sha256_hex;
use crate::state::AppState;
use crate::store::audit::{Actor, AuditEvent};
use crate::token_endpoint::endpoint::{self, RevocationRequest};
use crate::token_endpoint::oauth_error::OAuthError;

// RFC 7009 §2.1–§2.2.
pub async fn revoke(
    _: LocalMode,
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    endpoint::revocation(REALM, &state, &headers, body, client_verification::verify, revoke_delegation).await
}

/// The delegation the token descends from, if it is one of this client's, is revoked.
async fn revoke_delegation(state: &AppState, request: RevocationRequest) -> Result<(), OAuthError> {
    let RevocationRequest { client_id, token } = request;
    let (client_id, token) = (client_id.as_str(), token.as_str());
    // RFC 7009 §2.1: the hint only orders the look-ups; both kinds are tried.
    let delegation = match refresh_token_delegation(state, token, client_id).await? {
        Some(delegation) => Some(delegation),
        None => access_token_delegation(state, token, client_id),
    };
    let Some(delegation_id) = delegation else { return Ok(()) };
    if state.core.store.oauth_grants().revoke(&delegation_id, state.core.now()).await? {
        tracing::info!(%client_id, "a client revoked its tokens");
        let user_id = state.core.store.oauth_grants().user_of(&delegation_id).await?;
        let detail = format!("client={client_id}");
        let event = AuditEvent::new(Actor::Client(client_id), "oauth_grant.revoked_by_client", user_id.as_deref())
            .detail(Some(&detail));
        state.core.store.audit().record(state.core.now(), event).await?;
    }
    Ok(())
}

/// The delegation of one of this client's refresh tokens.
async fn refresh_token_delegation(
    state: &AppState,
    token: &str,
    client_id: &str,
) -> Result<Option<String>, OAuthError> {
    let row = state.core.store.oauth_grants().refresh_token(&sha256_hex(token)).await?;
    Ok(row.filter(|r| r.grant.client_id == client_id).map(|r| r.grant.grant_id))
}

/// The delegation of one of this client's (unexpired) access tokens, whichever resource it is for
/// (our MCP endpoint or a tool server's).
fn access_token_delegation(state: &AppState, token: &str, client_id: &str) -> Option<String> {
    let claims = state.identity.keys.verify_any_audience(token, state.core.now()).ok()?;
    match (claims.delegation_id, claims.client_id) {
        (Some(delegation_id), Some(owner)) if owner == client_id => Some(delegation_id),
        _ => None,
    }
}
