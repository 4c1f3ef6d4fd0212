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
//! Files: [`metadata`] (the issuer and its RFC 8414 document), [`authorize`], [`token`],
//! [`revoke`], [`demo_client`] (the one client it knows: the broker), [`api`] and its
//! [`api_error`]s, [`keys`], [`token_cache`], and [`entry`] (how the broker sees this provider).
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
mod metadata;
mod revoke;
mod token;
mod token_cache;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use axum::routing::{any, get, post};
use axum::{Extension, Router};

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/.well-known/oauth-authorization-server", get(metadata::metadata))
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
