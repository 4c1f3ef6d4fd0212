//! JSON error responses from `/register` (RFC 7591 §3.2.2); `/token` and `/revoke` answer with
//! [`crate::token_endpoint::oauth_error::OAuthError`]. Every description is a fixed sentence of ours;
//! nothing from the request is echoed.

use axum::Json;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::store::StoreError;
use crate::token_endpoint::oauth_error::no_store;

/// RFC 7591 §3.2.2 error from `/register`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistrationError {
    /// 400 `invalid_redirect_uri`.
    InvalidRedirectUri(&'static str),
    /// 400 `invalid_client_metadata` (also for a body that is not a JSON object).
    InvalidClientMetadata(&'static str),
    /// 429 with `Retry-After`: too many registrations from this address.
    TooMany { retry_after: i64 },
    /// 500: the database failed; logged, never shown.
    Server,
}

impl From<StoreError> for RegistrationError {
    fn from(error: StoreError) -> Self {
        tracing::error!(%error, "client registration: database error");
        Self::Server
    }
}

impl IntoResponse for RegistrationError {
    fn into_response(self) -> Response {
        let (status, code, description) = match self {
            Self::InvalidRedirectUri(d) => (StatusCode::BAD_REQUEST, "invalid_redirect_uri", d),
            Self::InvalidClientMetadata(d) => (StatusCode::BAD_REQUEST, "invalid_client_metadata", d),
            Self::TooMany { .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                "temporarily_unavailable",
                "too many client registrations from this address; try again later",
            ),
            Self::Server => (StatusCode::INTERNAL_SERVER_ERROR, "server_error", "registration failed; try again"),
        };
        let mut response =
            (status, Json(serde_json::json!({ "error": code, "error_description": description }))).into_response();
        no_store(&mut response);
        if let Self::TooMany { retry_after } = self {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, HeaderValue::from(retry_after.max(1)));
        }
        response
    }
}
