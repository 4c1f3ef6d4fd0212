//! Error responses of the API (RFC 6750 §3.1); the token and revocation endpoints answer with
//! [`crate::token_endpoint::oauth_error::OAuthError`]. Every body is a fixed string; nothing from the
//! request is echoed.

use axum::Json;
use axum::http::header::WWW_AUTHENTICATE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::domain::demo_scopes::DemoScope;
use crate::store::StoreError;

/// RFC 6750 §3.1 error from the protected API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiError {
    /// 400: a token in the query string, or a malformed body.
    InvalidRequest(&'static str),
    /// 401: missing, unknown, expired or revoked access token.
    InvalidToken,
    /// 401: an API key this provider refuses, with why (a fixed text, never the key).
    InvalidKey(&'static str),
    /// 403: the token lacks the scope this endpoint needs.
    InsufficientScope(DemoScope),
    /// 500: the database failed; logged, never shown.
    Server,
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        tracing::error!(%error, "demo provider API: database error");
        Self::Server
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, body, challenge) = match self {
            Self::InvalidRequest(description) => (
                StatusCode::BAD_REQUEST,
                serde_json::json!({ "error": "invalid_request", "error_description": description }),
                Some("Bearer error=\"invalid_request\"".to_owned()),
            ),
            Self::InvalidToken => (
                StatusCode::UNAUTHORIZED,
                serde_json::json!({ "error": "invalid_token" }),
                Some("Bearer error=\"invalid_token\"".to_owned()),
            ),
            Self::InvalidKey(description) => (
                StatusCode::UNAUTHORIZED,
                serde_json::json!({ "error": "invalid_key", "error_description": description }),
                None,
            ),
            Self::InsufficientScope(scope) => (
                StatusCode::FORBIDDEN,
                serde_json::json!({ "error": "insufficient_scope", "scope": scope.as_str() }),
                Some(format!("Bearer error=\"insufficient_scope\", scope=\"{}\"", scope.as_str())),
            ),
            Self::Server => (StatusCode::INTERNAL_SERVER_ERROR, serde_json::json!({ "error": "server_error" }), None),
        };
        let mut response = (status, Json(body)).into_response();
        if let Some(value) = challenge.and_then(|c| HeaderValue::from_str(&c).ok()) {
            response.headers_mut().insert(WWW_AUTHENTICATE, value);
        }
        response
    }
}
