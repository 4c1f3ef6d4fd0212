//! RFC 8414 authorization server metadata, at `/.well-known/oauth-authorization-server`.
//!
//! The issuer is the public URL, which is also what the protected-resource metadata names as
//! the authorization server. When the public URL has a path (`https://host/broker`), RFC 8414
//! §3.1 puts this document at `https://host/.well-known/oauth-authorization-server/broker`,
//! outside what the broker serves: the reverse proxy must map it.
//!
//! Not served as `/.well-known/openid-configuration`: this server issues no ID tokens and has
//! no userinfo endpoint, so claiming to be an OpenID provider would be false. MCP clients try
//! the RFC 8414 location first.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::local_mode::LocalMode;
use super::scopes;
use crate::state::AppState;

// RFC 8414 §2; MCP 2025-11-25 basic/authorization §Authorization Server Metadata Discovery.
pub async fn metadata(_: LocalMode, State(state): State<AppState>) -> Response {
    let config = &state.core.config;
    let body = json!({
        "issuer": config.issuer(),
        "authorization_endpoint": config.url("/authorize").as_str(),
        "token_endpoint": config.url("/token").as_str(),
        "registration_endpoint": config.url("/register").as_str(),
        "revocation_endpoint": config.url("/revoke").as_str(),
        "revocation_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
        "jwks_uri": config.url("/.well-known/jwks.json").as_str(),
        "scopes_supported": scopes::supported(config),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
        "code_challenge_methods_supported": ["S256"],
        // RFC 9207: authorization responses carry `iss`.
        "authorization_response_iss_parameter_supported": true,
        // SEP-991: a client_id may be the https URL of its metadata document.
        "client_id_metadata_document_supported": true,
    });
    ([(header::CACHE_CONTROL, "max-age=300")], Json(body)).into_response()
}
