//! The token endpoint (RFC 6749 §3.2): `authorization_code` (§4.1.3, RFC 7636 §4.6) and
//! `refresh_token` (§6) with rotation and reuse detection (OAuth 2.1 §4.3.1).
//!
//! Every token descends from one code and shares its `family_id`, derived from the code hash so
//! a replayed code can find what it issued. The new tokens are written *before* the one-time
//! step (consuming the code, retiring the refresh token) is attempted: whoever loses that
//! compare-and-swap revokes the whole family, and because the winner's tokens already exist
//! they are revoked too. So a code or refresh token used twice, even concurrently, leaves no
//! live token behind.

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::Response;

use super::demo_client::{self, REALM};
use crate::clock::Timestamp;
use crate::crypto::{random_token, sha256_hex};
use crate::domain::demo_scopes::ScopeSet;
use crate::state::AppState;
use crate::store::demo::{DemoTokenKind, NewDemoToken};
use crate::token_endpoint::endpoint::{self, TokenRequest, check_code_binding};
use crate::token_endpoint::oauth_error::OAuthError;
use crate::token_endpoint::params::Params;

/// Access tokens live an hour.
pub const ACCESS_TTL_SECS: i64 = 3600;
/// Refresh tokens rotate on every use; an unused one lapses after 30 days.
pub const REFRESH_TTL_SECS: i64 = 30 * 24 * 3600;

/// RFC 6749 §5.1. Deliberately not `Debug`: it holds live tokens.
#[derive(serde::Serialize)]
struct TokenResponse {
    access_token: String,
    token_type: &'static str,
    expires_in: i64,
    refresh_token: String,
    scope: String,
}

// RFC 6749 §3.2, §4.1.3, §6; OAuth 2.1 §3.2.
pub async fn token(State(state): State<AppState>, headers: HeaderMap, body: Result<Bytes, BytesRejection>) -> Response {
    endpoint::token(REALM, &state, &headers, body, demo_client::verify, grant).await
}

/// One arm per grant type this provider issues tokens for.
/// Each answer is logged with the client it went to (an id, never a secret or a token), so a
/// newcomer trying an organization's own app sees which client each connection used.
async fn grant(state: &AppState, request: TokenRequest) -> Result<TokenResponse, OAuthError> {
    let grant_type = request.grant_type()?;
    let answer = match grant_type {
        "authorization_code" => authorization_code(state, &request.client_id, &request.params).await,
        "refresh_token" => refresh_token(state, &request.client_id, &request.params).await,
        _ => Err(OAuthError::UnsupportedGrantType),
    };
    match &answer {
        Ok(_) => tracing::info!(client_id = %request.client_id, grant_type, "demo provider: tokens issued"),
        Err(error) => {
            tracing::info!(client_id = %request.client_id, grant_type, error = error.code(), "demo provider: token request refused")
        }
    }
    answer
}

/// The family of every token issued from a code: a hash of the code's hash, so it is stable,
/// reveals nothing, and a replay of the code can find it.
pub fn family_of(code_hash: &str) -> String {
    sha256_hex(code_hash)
}

// RFC 6749 §4.1.3, RFC 7636 §4.6.
async fn authorization_code(state: &AppState, client_id: &str, params: &Params) -> Result<TokenResponse, OAuthError> {
    let code = params.get("code").ok_or(OAuthError::InvalidRequest("code is required"))?;
    let code_hash = sha256_hex(code);
    let row = state.core.store.demo().code(&code_hash).await?.ok_or(OAuthError::InvalidGrant)?;
    if row.client_id != client_id {
        return Err(OAuthError::InvalidGrant);
    }
    let family_id = family_of(&code_hash);
    let now = state.core.now();
    if row.used_at.is_some() {
        // RFC 6749 §4.1.2: a code used more than once revokes the tokens issued from it.
        let revoked = state.core.store.demo().revoke_family(&family_id, now).await?;
        tracing::warn!(revoked, "demo provider: authorization code reused; its tokens were revoked");
        return Err(OAuthError::InvalidGrant);
    }
    if row.expires_at <= now {
        return Err(OAuthError::InvalidGrant);
    }
    check_code_binding(params, &row.redirect_uri, &row.code_challenge)?;
    let tokens = issue_pair(state, &family_id, client_id, &row.account, &row.scopes, &row.scopes, now).await?;
    if !state.core.store.demo().consume_code(&code_hash, now).await? {
        let revoked = state.core.store.demo().revoke_family(&family_id, now).await?;
        tracing::warn!(revoked, "demo provider: authorization code redeemed concurrently; its tokens were revoked");
        return Err(OAuthError::InvalidGrant);
    }
    Ok(tokens)
}

// RFC 6749 §6, OAuth 2.1 §4.3.1 (rotation, reuse detection).
async fn refresh_token(state: &AppState, client_id: &str, params: &Params) -> Result<TokenResponse, OAuthError> {
    let presented = params.get("refresh_token").ok_or(OAuthError::InvalidRequest("refresh_token is required"))?;
    let token_hash = sha256_hex(presented);
    let row = state
        .core
        .store
        .demo()
        .token(&token_hash)
        .await?
        .filter(|row| row.kind == DemoTokenKind::Refresh)
        .ok_or(OAuthError::InvalidGrant)?;
    if row.client_id != client_id {
        return Err(OAuthError::InvalidGrant);
    }
    let now = state.core.now();
    if row.revoked_at.is_some() {
        // Already rotated (or revoked): whoever holds it now may be an attacker, so the whole
        // family goes, the legitimate client included, and the user must consent again.
        let revoked = state.core.store.demo().revoke_family(&row.family_id, now).await?;
        tracing::warn!(revoked, "demo provider: refresh token reused; its family was revoked");
        return Err(OAuthError::InvalidGrant);
    }
    if row.expires_at <= now {
        return Err(OAuthError::InvalidGrant);
    }
    let granted = &row.scopes;
    // §6: a requested scope may narrow the access token, never widen it; the new refresh
    // token keeps the original scope.
    let access_scopes = match params.get("scope") {
        None => granted.clone(),
        Some(requested) => {
            let requested = ScopeSet::parse_requested(Some(requested)).map_err(|_| OAuthError::InvalidScope)?;
            if !requested.is_subset_of(granted) {
                return Err(OAuthError::InvalidScope);
            }
            requested
        }
    };
    let tokens = issue_pair(state, &row.family_id, client_id, &row.account, &access_scopes, granted, now).await?;
    if !state.core.store.demo().revoke_token(&token_hash, now).await? {
        let revoked = state.core.store.demo().revoke_family(&row.family_id, now).await?;
        tracing::warn!(revoked, "demo provider: refresh token used concurrently; its family was revoked");
        return Err(OAuthError::InvalidGrant);
    }
    Ok(tokens)
}

async fn issue_pair(
    state: &AppState,
    family_id: &str,
    client_id: &str,
    account: &str,
    access_scopes: &ScopeSet,
    refresh_scopes: &ScopeSet,
    now: Timestamp,
) -> Result<TokenResponse, OAuthError> {
    let access_token = format!("demo_at_{}", random_token(32));
    let refresh_token = format!("demo_rt_{}", random_token(32));
    let access_hash = sha256_hex(&access_token);
    let refresh_hash = sha256_hex(&refresh_token);
    for (token_hash, kind, scopes, expires_at) in [
        (&access_hash, DemoTokenKind::Access, access_scopes, now + ACCESS_TTL_SECS),
        (&refresh_hash, DemoTokenKind::Refresh, refresh_scopes, now + REFRESH_TTL_SECS),
    ] {
        let token = NewDemoToken { token_hash, kind, family_id, client_id, account, scopes, expires_at };
        state.core.store.demo().insert_token(&token).await?;
    }
    Ok(TokenResponse {
        access_token,
        token_type: "Bearer",
        expires_in: ACCESS_TTL_SECS,
        refresh_token,
        scope: access_scopes.to_space_separated(),
    })
}
