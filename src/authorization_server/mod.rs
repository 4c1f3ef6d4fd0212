//! The broker as its own OAuth 2.1 authorization server for MCP clients (`[identity] mode =
//! "local"`, the default): an MCP client that implements MCP authorization (2025-11-25
//! basic/authorization) discovers us from the 401 on /mcp and connects with no pre-issued token.
//!
//! ```text
//! GET  /.well-known/oauth-authorization-server   RFC 8414 metadata            (metadata)
//! POST /register     RFC 7591 dynamic registration, JSON, rate-limited       (registration)
//!      client_id = https URL → client ID metadata document, fetched SSRF-safely (client_metadata_document)
//! GET  /authorize    validate → /login?next=… → consent page naming the client  (authorize)
//! POST /authorize    re-validate + session CSRF → code (60 s, single use) or access_denied
//! POST /token        client auth → authorization_code (PKCE S256) | refresh_token (rotation) (token)
//! POST /revoke       RFC 7009: client auth → the token's grant revoked          (revocation)
//! ```
//!
//! Access tokens are the broker's own EdDSA JWTs ([`crate::identity::jwt::TokenKeys`]): `iss` =
//! the public URL, `aud` = the MCP endpoint URL (RFC 8707 `resource`, which must be exactly that),
//! `sub` = the user, plus `client_id`, `scope` and `grant_id`, so the /mcp bearer check accepts
//! them unchanged. Codes, client secrets and refresh tokens are stored only as hashes
//! ([`crate::store::authorization_server`]) and never logged.
//!
//! Form parsing, client credentials, RFC 6749 §5.2 errors and the token/revocation request
//! checks are shared with the demo provider ([`crate::token_endpoint`]).
//!
//! A request whose client or redirect URI cannot be trusted gets an error page, never a redirect
//! (no open redirector, RFC 9700 §4.11); other authorization errors go back to the client's
//! registered redirect URI with `state` and `iss` (RFC 9207).

pub mod authorize;
pub mod client;
mod client_auth;
pub mod client_metadata_document;
mod errors;
pub mod lookup;
pub mod metadata;
pub mod redirect_uri;
pub mod registration;
pub mod revocation;
pub mod scopes;
pub mod token;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, FromRequestParts};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::routing::{get, post};
use axum::{Extension, Router};

use crate::config::IdentityMode;
use crate::state::AppState;

/// RFC 6749 §4.1.2 recommends at most 10 minutes; a short life makes replays obvious.
pub const CODE_TTL_SECS: i64 = 60;
/// Access tokens (JWTs, not revocable at /mcp by themselves) live one hour.
pub const ACCESS_TOKEN_TTL_SECS: i64 = 3600;
/// Refresh tokens rotate on every use; an unused one lapses after 30 days.
pub const REFRESH_TOKEN_TTL_SECS: i64 = 30 * 24 * 3600;
/// Request bodies of /register, /authorize (POST) and /token.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// The authorization server's routes. They answer 404 unless `[identity] mode = "local"`.
pub fn router() -> Router<AppState> {
    // One cache per running app (tests run several apps in one process); the registration
    // budget is kept in the database, shared by every instance.
    let documents = Arc::new(client_metadata_document::DocumentCache::new());
    Router::new()
        .route("/.well-known/oauth-authorization-server", get(metadata::metadata))
        .route("/register", post(registration::register))
        .route("/authorize", get(authorize::show).post(authorize::decide))
        .route("/token", post(token::token))
        .route("/revoke", post(revocation::revoke))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(Extension(documents))
}

/// Extractor that lets a request through only in local identity mode; otherwise 404 (an
/// external issuer is the authorization server then, and the PRM names it).
#[derive(Debug, Clone, Copy)]
pub struct LocalMode;

impl FromRequestParts<AppState> for LocalMode {
    type Rejection = StatusCode;

    async fn from_request_parts(_parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if state.core.config.identity.mode == IdentityMode::Local { Ok(LocalMode) } else { Err(StatusCode::NOT_FOUND) }
    }
}
