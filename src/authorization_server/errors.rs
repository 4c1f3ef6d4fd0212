//! JSON error responses: RFC 6749 §5.2 from `/token`, RFC 7591 §3.2.2 from `/register`. Every
//! description is a fixed sentence of ours; nothing from the request (least of all a code,
//! token or secret) is echoed.

use axum::Json;
use axum::http::header::{CACHE_CONTROL, PRAGMA, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::store::StoreError;

/// RFC 6749 §5.2 error from `/token`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthError {
    /// 400: malformed request (missing or repeated parameter, wrong content type).
    InvalidRequest(&'static str),
    /// 401 with `WWW-Authenticate: Basic`: client authentication failed or was missing.
    InvalidClient,
    /// 400: the code or refresh token is invalid, expired, used, revoked or another client's.
    InvalidGrant,
    /// 400: the client may not use this grant type.
    UnauthorizedClient,
    /// 400: a grant type other than `authorization_code` or `refresh_token`.
    UnsupportedGrantType,
    /// 400: a `scope` wider than the grant.
    InvalidScope,
    /// 400 (RFC 8707 §2): a `resource` other than the one the grant is for.
    InvalidTarget,
    /// 500: the database failed; logged, never shown.
    Server,
}

impl OAuthError {
    pub fn code(self) -> &'static str {
        match self {
            Self::InvalidRequest(_) => "invalid_request",
            Self::InvalidClient => "invalid_client",
            Self::InvalidGrant => "invalid_grant",
            Self::UnauthorizedClient => "unauthorized_client",
            Self::UnsupportedGrantType => "unsupported_grant_type",
            Self::InvalidScope => "invalid_scope",
            Self::InvalidTarget => "invalid_target",
            Self::Server => "server_error",
        }
    }
}

impl From<StoreError> for OAuthError {
    fn from(error: StoreError) -> Self {
        tracing::error!(%error, "authorization server: database error");
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
            response.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"oauth-broker\""));
        }
        response
    }
}

/// RFC 6749 §5.1: responses carrying tokens or secrets (and their errors) must not be cached.
pub fn no_store(response: &mut Response) {
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response.headers_mut().insert(PRAGMA, HeaderValue::from_static("no-cache"));
}

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
