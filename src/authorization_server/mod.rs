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
//!                    service auth → RFC 8693 token exchange, in either identity mode (token_exchange)
//! POST /revoke       RFC 7009: client auth → the token's delegation revoked     (revocation)
//! ```
//!
//! Access tokens are the broker's own EdDSA JWTs ([`crate::identity::jwt::TokenKeys`]): `iss` =
//! the public URL, `aud` = the MCP endpoint URL (RFC 8707 `resource`, which must be exactly that),
//! `sub` = the user, plus `client_id`, `scope` and `grant_id` (the delegation), so the /mcp
//! bearer check accepts them unchanged. Codes, client secrets and refresh tokens are stored only
//! as hashes ([`crate::store::authorization_server`], [`crate::store::authorization_server`]) and never logged.
//!
//! A user's approval of a client here is a **delegation** (a row of `oauth_grants`): the codes
//! and refresh tokens it issues hang off it, its access tokens name it, and revoking it (a
//! replayed code or refresh token, `/revoke`, the user ending the app's access on their
//! connections page, where these are their "apps") ends them all. A *grant* elsewhere in the
//! broker is a user's connection at a provider.
//!
//! `/authorize` is three files: [`authorize`] (the handlers), [`authorize_request`] (the
//! checks) and [`authorize_consent`] (the page). Beside the endpoints: [`client`] (an MCP client as this server knows it), [`lookup`] (the
//! client a `client_id` names), [`client_verification`] (a presented client checked by the method
//! it registered), [`redirect_uri`] (which redirect URIs a client may register), [`scopes`] (what
//! this server grants), [`registration_error`] (`/register`'s RFC 7591 errors) and
//! [`LocalMode`] (the endpoints answer only in local mode; the token exchange in either).
//!
//! Form parsing, client credentials, RFC 6749 §5.2 errors and the token/revocation request
//! checks are shared with the demo provider ([`crate::token_endpoint`]).
//!
//! A request whose client or redirect URI cannot be trusted gets an error page, never a redirect
//! (no open redirector, RFC 9700 §4.11); other authorization errors go back to the client's
//! registered redirect URI with `state` and `iss` (RFC 9207).

pub mod authorize;
mod authorize_consent;
mod authorize_request;
pub mod client;
pub mod client_metadata_document;
mod client_verification;
mod local_mode;
pub mod lookup;
pub mod metadata;
pub mod redirect_uri;
pub mod registration;
mod registration_error;
pub mod revocation;
pub mod scopes;
pub mod token;
pub mod token_exchange;

pub use local_mode::LocalMode;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::{Extension, Router};

use crate::state::AppState;

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
