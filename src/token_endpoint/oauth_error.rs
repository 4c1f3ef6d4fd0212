//! RFC 6749 §5.2 error responses from the token and revocation endpoints (RFC 7009 §2.2.1 uses
//! the same shape). Every description is a fixed sentence of ours; nothing from the request
//! (least of all a code, token or secret) is echoed.

use axum::Json;
use axum::http::header::{CACHE_CONTROL, PRAGMA, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::store::StoreError;

/// RFC 6749 §5.2 error from `/token` or `/revoke`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthError {
    /// 400: malformed request (missing or repeated parameter, wrong content type, unreadable body).
    InvalidRequest(&'static str),
    /// 401 with `WWW-Authenticate: Basic`: client authentication failed or was missing.
    InvalidClient,
    /// 400: the code or refresh token is invalid, expired, used, revoked or another client's.
    InvalidGrant,
    /// 400: the client may not use this grant type.
    UnauthorizedClient,
    /// 400: a grant type the endpoint does not support.
    UnsupportedGrantType,
    /// 400: a `scope` that is unknown or wider than the grant.
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

    /// The error as the server protecting `realm` answers it. RFC 6749 §5.2: `invalid_client`
    /// after a failed or missing authentication is a 401 with a `Basic` challenge (RFC 7617 §2
    /// names the protection space by its realm).
    pub fn into_response_for(self, realm: &'static str) -> Response {
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
        if self == Self::InvalidClient
            && let Ok(challenge) = HeaderValue::from_str(&format!("Basic realm=\"{realm}\""))
        {
            response.headers_mut().insert(WWW_AUTHENTICATE, challenge);
        }
        response
    }
}

impl From<StoreError> for OAuthError {
    fn from(error: StoreError) -> Self {
        tracing::error!(%error, "OAuth endpoint: database error");
        Self::Server
    }
}

/// RFC 6749 §5.1: responses carrying tokens or secrets (and their errors) must not be cached.
pub fn no_store(response: &mut Response) {
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response.headers_mut().insert(PRAGMA, HeaderValue::from_static("no-cache"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_client_challenges_with_the_servers_realm_and_nothing_is_cached() {
        let response = OAuthError::InvalidClient.into_response_for("demo-provider");
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(response.headers()[WWW_AUTHENTICATE], "Basic realm=\"demo-provider\"");
        assert_eq!(response.headers()[CACHE_CONTROL], "no-store");
        let response = OAuthError::InvalidGrant.into_response_for("demo-provider");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert!(response.headers().get(WWW_AUTHENTICATE).is_none());
        assert_eq!(response.headers()[PRAGMA], "no-cache");
    }
}
