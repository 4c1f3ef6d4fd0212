//! Token revocation (RFC 7009). One table holds both kinds of token, so `token_type_hint` is
//! not needed (§2.1 lets it only speed up a look-up).

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::Response;

use super::demo_client::{self, REALM};
use crate::crypto::sha256_hex;
use crate::state::AppState;
use crate::store::demo::DemoTokenKind;
use crate::token_endpoint::endpoint::{self, RevocationRequest};
use crate::token_endpoint::oauth_error::OAuthError;

// RFC 7009 §2.1–§2.2.
pub async fn revoke(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    endpoint::revocation(REALM, &state, &headers, body, demo_client::verify, revoke_token).await
}

async fn revoke_token(state: &AppState, request: RevocationRequest) -> Result<(), OAuthError> {
    let Some(row) = state.core.store.demo().token(&sha256_hex(&request.token)).await? else {
        // §2.2: an unknown token is answered with 200, so the endpoint reveals nothing.
        return Ok(());
    };
    if row.client_id != request.client_id {
        // §2.1 lets us refuse; a silent 200 reveals less about someone else's token.
        return Ok(());
    }
    let now = state.core.now();
    if row.kind == DemoTokenKind::Refresh {
        // §2.1: revoking a refresh token also invalidates the access tokens of the same grant.
        state.core.store.demo().revoke_family(&row.family_id, now).await?;
    } else {
        state.core.store.demo().revoke_token(&row.token_hash, now).await?;
    }
    Ok(())
}
