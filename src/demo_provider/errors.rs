//! Error responses: RFC 6749 §5.2 JSON for the token and revocation endpoints, RFC 6750 §3.1
//! for the API. Every body is a fixed string; nothing from the request is echoed.

use axum::Json;
use axum::http::header::{CACHE_CONTROL, PRAGMA, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::scopes::DemoScope;
use crate::store::StoreError;

/// RFC 6749 §5.2 error from `/token` or `/revoke`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthError {
    /// 400: malformed request (missing or repeated parameter, wrong content type).
    InvalidRequest(&'static str),
    /// 401 with `WWW-Authenticate: Basic`: client authentication failed or was missing.
    InvalidClient,
    /// 400: the code or refresh token is invalid, expired, revoked, reused or not ours.
    InvalidGrant,
    /// 400: a `scope` on refresh that is unknown or wider than the grant.
    InvalidScope,
    /// 400: a grant type other than `authorization_code` or `refresh_token`.
    UnsupportedGrantType,
    /// 500: the database failed; logged, never shown.
    Server,
}

impl OAuthError {
    pub fn code(self) -> &'static str {
        match self {
            Self::InvalidRequest(_) => "invalid_request",
            Self::InvalidClient => "invalid_client",
            Self::InvalidGrant => "invalid_grant",
            Self::InvalidScope => "invalid_scope",
            Self::UnsupportedGrantType => "unsupported_grant_type",
            Self::Server => "server_error",
        }
    }
}

impl From<StoreError> for OAuthError {
    fn from(error: StoreError) -> Self {
        tracing::error!(%error, "demo provider: database error");
        Self::Server
    }
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let status = match self {
            Self::InvalidClient => StatusCode::UNAUTHORIZED,
            Self::Server => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        };
        let body = match self {
            Self::InvalidRequest(description) => {
                serde_json::json!({ "error": self.code(), "error_description": description })
            }
            _ => serde_json::json!({ "error": self.code() }),
        };
        let mut response = (status, Json(body)).into_response();
        no_store(&mut response);
        if self == Self::InvalidClient {
            response.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"demo-provider\""));
        }
        response
    }
}

/// RFC 6749 §5.1: responses carrying tokens (and their errors) must not be cached.
pub fn no_store(response: &mut Response) {
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response.headers_mut().insert(PRAGMA, HeaderValue::from_static("no-cache"));
}

/// RFC 6750 §3.1 error from the protected API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiError {
    /// 400: a token in the query string, or a malformed body.
    InvalidRequest(&'static str),
    /// 401: missing, unknown, expired or revoked access token.
    InvalidToken,
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
