//! [`LocalMode`]: the authorization server's own endpoints answer only in `[identity] mode =
//! "local"`; with an external issuer, that issuer is the authorization server.

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;

use crate::config::IdentityMode;
use crate::state::AppState;

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
