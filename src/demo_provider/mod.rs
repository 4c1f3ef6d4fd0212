//! The built-in demo provider: a strict OAuth 2.1 authorization server plus a small API,
//! served under `/demo-provider/`. It plays the third party for the offline demo and for the
//! integration tests, so it refuses whatever a real, strict provider would: a lenient fake
//! would hide broker bugs.
//!
//! ```text
//! GET  /authorize   validate (client, exact redirect URI, S256 PKCE, scopes, state) → approve page
//! POST /authorize   re-validate → code (60 s, single use) or access_denied, with iss (RFC 9207)
//! POST /token       client auth; authorization_code (PKCE) | refresh_token (rotation, reuse → revoke family)
//! POST /revoke      RFC 7009; a refresh token takes its family with it
//! /api/me, /api/notes, /api/echo   bearer-header-only API, one scope per endpoint
//! GET/POST /keys, POST /keys/revoke  API keys (X-Demo-Key on /api/*) for the broker's key mode
//! GET  /.well-known/oauth-authorization-server   RFC 8414 metadata
//! ```
//!
//! Form parsing, client credentials, RFC 6749 §5.2 errors and the token/revocation request
//! checks are shared with the broker's own authorization server ([`crate::token_endpoint`]).
//!
//! Codes and tokens are stored as SHA-256 hashes ([`crate::store::demo`]); one-time steps are
//! compare-and-swap updates, so they hold across instances too. Live access tokens are kept
//! between API calls until a revocation anywhere ([`token_cache`]).

pub mod api;
mod api_error;
mod authorize;
mod demo_client;
pub mod entry;
pub mod keys;
mod revoke;
mod token;
mod token_cache;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use axum::extract::State;
use axum::response::Json;
use axum::routing::{any, get, post};
use axum::{Extension, Router};
use serde_json::{Value, json};

use crate::domain::demo_scopes::DemoScope;
use crate::state::AppState;

/// RFC 6749 §4.1.2 recommends at most 10 minutes; a short life makes replays obvious.
pub const CODE_TTL_SECS: i64 = 60;
pub const ACCESS_TTL_SECS: i64 = 3600;
pub const REFRESH_TTL_SECS: i64 = 30 * 24 * 3600;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/.well-known/oauth-authorization-server", get(metadata))
        .route("/authorize", get(authorize::show).post(authorize::decide))
        .route("/token", post(token::token))
        .route("/revoke", post(revoke::revoke))
        .route("/keys", get(keys::show).post(keys::create))
        .route("/keys/revoke", post(keys::revoke))
        .route("/api/me", get(api::me))
        .route("/api/notes", get(api::list_notes).post(api::create_note))
        .route("/api/slow", get(api::slow))
        .route("/api/echo", any(api::echo))
        .route("/api/echo/{*rest}", any(api::echo))
        // One cache per router, so per app (and per store: its generation is that store's).
        .layer(Extension(Arc::new(token_cache::TokenCache::default())))
}

/// The issuer identifier, without a trailing slash; also the `iss` of authorization responses.
pub fn issuer(state: &AppState) -> String {
    state.core.config.url("/demo-provider").as_str().trim_end_matches('/').to_owned()
}

// RFC 8414 §2 (served at the issuer + /.well-known path, as OpenID Connect Discovery does).
async fn metadata(State(state): State<AppState>) -> Json<Value> {
    let issuer = issuer(&state);
    let scopes: Vec<&str> = DemoScope::ALL.iter().map(|s| s.as_str()).collect();
    Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "revocation_endpoint": format!("{issuer}/revoke"),
        "scopes_supported": scopes,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "revocation_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": true,
    }))
}
