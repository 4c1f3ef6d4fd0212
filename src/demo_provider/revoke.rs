//! Token revocation (RFC 7009).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::client_auth::authenticate;
use super::errors::{OAuthError, no_store};
use super::params::{Params, is_form};
use crate::crypto::sha256_hex;
use crate::state::AppState;
use crate::store::demo::DemoTokenKind;

// RFC 7009 §2.1–§2.2.
pub async fn revoke(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    match handle(&state, &headers, &body).await {
        Ok(()) => {
            let mut response = StatusCode::OK.into_response();
            no_store(&mut response);
            response
        }
        Err(error) => error.into_response(),
    }
}

async fn handle(state: &AppState, headers: &HeaderMap, body: &[u8]) -> Result<(), OAuthError> {
    if !is_form(headers) {
        return Err(OAuthError::InvalidRequest("the body must be application/x-www-form-urlencoded"));
    }
    let params = Params::parse(body);
    let client_id = authenticate(state, headers, &params)?;
    if params.has_duplicates() {
        return Err(OAuthError::InvalidRequest("a parameter was sent more than once"));
    }
    let token = params.get("token").ok_or(OAuthError::InvalidRequest("token is required"))?;
    // `token_type_hint` only speeds up a lookup (§2.1); one table holds both kinds, so it is
    // ignored, and a wrong hint must not stop the revocation.
    let Some(row) = state.store.demo_token(&sha256_hex(token)).await? else {
        // §2.2: an unknown token is answered with 200, so the endpoint reveals nothing.
        return Ok(());
    };
    if row.client_id != client_id {
        // §2.1 lets us refuse; a silent 200 reveals less about someone else's token.
        return Ok(());
    }
    let now = state.now();
    if row.is_kind(DemoTokenKind::Refresh) {
        // §2.1: revoking a refresh token also invalidates the access tokens of the same grant.
        state.store.demo_revoke_family(&row.family_id, now).await?;
    } else {
        state.store.demo_revoke_token(&row.token_hash, now).await?;
    }
    Ok(())
}
