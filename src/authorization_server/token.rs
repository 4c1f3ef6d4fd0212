//! The token endpoint (OAuth 2.1 §3.2, RFC 6749 §4.1.3 and §6, RFC 7636 §4.6, RFC 8707 §2.2).
//!
//! `authorization_code`: the code must exist, be unexpired and unused, belong to the
//! authenticated client, come with the identical `redirect_uri` and a `code_verifier` whose S256
//! is the stored challenge. It is consumed by compare-and-swap; a second use — a replay, or a
//! concurrent redemption — revokes the delegation, which kills every refresh token issued from
//! it.
//!
//! `refresh_token`: rotation (OAuth 2.1 §4.3.1). Each use retires the presented token by
//! compare-and-swap and issues a new one; presenting a retired token revokes the whole delegation
//! (the legitimate client included: the user must consent again).
//!
//! Access tokens are JWTs from [`crate::identity::jwt::TokenKeys::issue_for_client`] (`aud` =
//! the delegation's resource: the MCP endpoint URL, or a registered tool server's, which the
//! token API checks — never both), so /mcp verifies them without a
//! database lookup — and so a revoked delegation's access tokens stay valid until they expire (at
//! most [`ACCESS_TOKEN_TTL_SECS`]) unless the bearer check also asks
//! [`crate::store::authorization_server::OAuthGrants::is_active`] about their `grant_id` claim.

use std::collections::BTreeSet;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::client_verification::{self, REALM};
use super::{scopes, token_exchange};
use crate::clock::Timestamp;
use crate::crypto::{random_token, sha256_hex};
use crate::state::AppState;
use crate::store::authorization_server::OAuthGrantFields;
use crate::token_endpoint::endpoint::{self, TokenRequest, check_code_binding};
use crate::token_endpoint::oauth_error::OAuthError;
use crate::token_endpoint::params::{Params, is_form};

/// Access tokens (JWTs, not revocable at /mcp by themselves) live one hour.
pub const ACCESS_TOKEN_TTL_SECS: i64 = 3600;
/// Refresh tokens rotate on every use; an unused one lapses after 30 days.
pub const REFRESH_TOKEN_TTL_SECS: i64 = 30 * 24 * 3600;

/// RFC 6749 §5.1. Deliberately not `Debug`: it holds live tokens.
#[derive(serde::Serialize)]
struct TokenResponse {
    access_token: String,
    token_type: &'static str,
    expires_in: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    refresh_token: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    scope: String,
}

// OAuth 2.1 §3.2. RFC 8693 token exchange is for registered tool servers, in either identity
// mode ([`token_exchange`]); every other grant is for MCP clients, in local mode only.
pub async fn token(
    State(state): State<AppState>,
    crate::net::ClientIp(address): crate::net::ClientIp,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if let Ok(bytes) = &body
        && is_form(&headers)
    {
        let params = Params::parse(bytes);
        if params.get("grant_type") == Some(token_exchange::GRANT_TYPE) {
            if params.has_duplicates() {
                return OAuthError::InvalidRequest("a parameter was sent more than once").into_response_for(REALM);
            }
            return token_exchange::exchange(&state, &headers, &address, |name| params.get(name)).await;
        }
    }
    if state.core.config.identity.mode != crate::config::IdentityMode::Local {
        return StatusCode::NOT_FOUND.into_response();
    }
    endpoint::token(REALM, &state, &headers, body, client_verification::verify, grant).await
}

/// One arm per grant type this server issues tokens for.
async fn grant(state: &AppState, request: TokenRequest) -> Result<TokenResponse, OAuthError> {
    match request.grant_type()? {
        "authorization_code" => authorization_code(state, &request.client_id, &request.params).await,
        "refresh_token" => refresh_token(state, &request.client_id, &request.params).await,
        _ => Err(OAuthError::UnsupportedGrantType),
    }
}

/// RFC 8707 §2.2: a `resource` on the token request must be the one the delegation is for.
fn check_resource(params: &Params, delegation: &OAuthGrantFields) -> Result<(), OAuthError> {
    match params.get("resource") {
        Some(resource) if resource != delegation.resource => Err(OAuthError::InvalidTarget),
        _ => Ok(()),
    }
}

/// Revokes the delegation after a replay and says so in the log (never the code or token itself).
async fn revoke_after_replay(state: &AppState, delegation: &OAuthGrantFields, what: &str) -> Result<(), OAuthError> {
    state.core.store.oauth_grants().revoke(&delegation.grant_id, state.core.now()).await?;
    tracing::warn!(client_id = %delegation.client_id, user_id = %delegation.user_id, "{what} reused; the grant was revoked");
    state
        .core
        .store
        .audit()
        .record_implied(
            state.core.now(),
            Some(&delegation.user_id),
            "oauth_grant.revoked_on_reuse",
            None,
            Some(&delegation.client_id),
        )
        .await?;
    Ok(())
}

// RFC 6749 §4.1.3, RFC 7636 §4.6.
async fn authorization_code(state: &AppState, client_id: &str, params: &Params) -> Result<TokenResponse, OAuthError> {
    let code = params.get("code").ok_or(OAuthError::InvalidRequest("code is required"))?;
    let code_hash = sha256_hex(code);
    let row = state.core.store.oauth_grants().code(&code_hash).await?.ok_or(OAuthError::InvalidGrant)?;
    // Another client's code: refused without touching it (the rightful client may still use it).
    if row.grant.client_id != client_id {
        return Err(OAuthError::InvalidGrant);
    }
    let now = state.core.now();
    if row.used_at.is_some() {
        // RFC 6749 §4.1.2: a code used twice revokes the tokens issued from it.
        revoke_after_replay(state, &row.grant, "authorization code").await?;
        return Err(OAuthError::InvalidGrant);
    }
    if row.expires_at <= now || row.grant.grant_revoked_at.is_some() {
        return Err(OAuthError::InvalidGrant);
    }
    check_code_binding(params, &row.redirect_uri, &row.code_challenge)?;
    check_resource(params, &row.grant)?;
    if !state.core.store.oauth_grants().consume_code(&code_hash, now).await? {
        // Lost the race to a concurrent redemption of the same code: treat it as a replay.
        revoke_after_replay(state, &row.grant, "authorization code").await?;
        return Err(OAuthError::InvalidGrant);
    }
    issue(state, &row.grant, &row.grant.scope.to_space_separated(), now).await
}

// RFC 6749 §6, OAuth 2.1 §4.3.1 (rotation, reuse detection).
async fn refresh_token(state: &AppState, client_id: &str, params: &Params) -> Result<TokenResponse, OAuthError> {
    let presented = params.get("refresh_token").ok_or(OAuthError::InvalidRequest("refresh_token is required"))?;
    let token_hash = sha256_hex(presented);
    let row = state.core.store.oauth_grants().refresh_token(&token_hash).await?.ok_or(OAuthError::InvalidGrant)?;
    if row.grant.client_id != client_id {
        return Err(OAuthError::InvalidGrant);
    }
    if !row.grant.refresh_allowed {
        return Err(OAuthError::UnauthorizedClient);
    }
    let now = state.core.now();
    if row.grant.grant_revoked_at.is_some() {
        return Err(OAuthError::InvalidGrant);
    }
    if row.rotated_at.is_some() {
        // Already rotated: whoever holds it now may be an attacker, so the delegation goes.
        revoke_after_replay(state, &row.grant, "refresh token").await?;
        return Err(OAuthError::InvalidGrant);
    }
    if row.expires_at <= now {
        return Err(OAuthError::InvalidGrant);
    }
    check_resource(params, &row.grant)?;
    let granted: BTreeSet<String> = row.grant.scope.iter().map(str::to_owned).collect();
    // §6: a requested scope may narrow the access token, never widen it; the new refresh token
    // keeps the delegation's scope.
    let access_scope = match params.get("scope") {
        None => scopes::join(&granted),
        Some(requested) => {
            let requested = scopes::parse_list(requested, &granted).map_err(|_| OAuthError::InvalidScope)?;
            scopes::join(&requested)
        }
    };
    if !state.core.store.oauth_grants().rotate_refresh_token(&token_hash, now).await? {
        revoke_after_replay(state, &row.grant, "refresh token").await?;
        return Err(OAuthError::InvalidGrant);
    }
    issue(state, &row.grant, &access_scope, now).await
}

/// A new access token (and refresh token, when the client registered that grant).
async fn issue(
    state: &AppState,
    delegation: &OAuthGrantFields,
    access_scope: &str,
    now: Timestamp,
) -> Result<TokenResponse, OAuthError> {
    let user = state.core.store.users().by_id(&delegation.user_id).await?.ok_or(OAuthError::InvalidGrant)?;
    // A disabled user's clients get no new tokens (their current ones fail at /mcp already).
    if user.is_disabled() {
        return Err(OAuthError::InvalidGrant);
    }
    // The bearer check finds users by (iss, sub), and a local account by its id whatever URL it
    // was created under; a token naming another issuer's external user would be refused there,
    // so refuse it here.
    if !user.is_local() && user.issuer != state.identity.keys.issuer() {
        tracing::error!(user_id = %user.id, "grant does not match this server's issuer");
        return Err(OAuthError::InvalidGrant);
    }
    // The audience: our MCP endpoint, or a tool server that is still registered (a removed
    // one's delegations issue nothing more).
    if delegation.resource != state.identity.keys.audience()
        && state.core.store.services().by_resource(&delegation.resource).await?.is_none()
    {
        tracing::warn!(user_id = %user.id, "grant's resource is no longer a registered tool server");
        return Err(OAuthError::InvalidGrant);
    }
    let access_token = state
        .identity
        .keys
        .issue_for_client(
            &user.subject,
            &crate::identity::jwt::ClientDelegation {
                client_id: &delegation.client_id,
                scope: access_scope,
                delegation_id: &delegation.grant_id,
                audience: &delegation.resource,
            },
            now,
            ACCESS_TOKEN_TTL_SECS,
        )
        .map_err(|error| {
            tracing::error!(%error, "signing an access token failed");
            OAuthError::Server
        })?;
    let refresh_token = if delegation.refresh_allowed {
        let token = random_token(32);
        state
            .core
            .store
            .oauth_grants()
            .insert_refresh_token(&sha256_hex(&token), &delegation.grant_id, now, now + REFRESH_TOKEN_TTL_SECS)
            .await?;
        Some(token)
    } else {
        None
    };
    tracing::info!(client_id = %delegation.client_id, user_id = %delegation.user_id, "access token issued to MCP client");
    Ok(TokenResponse {
        access_token,
        token_type: "Bearer",
        expires_in: ACCESS_TOKEN_TTL_SECS,
        refresh_token,
        scope: access_scope.to_owned(),
    })
}
