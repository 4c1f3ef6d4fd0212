//! [`Problem`]: a refusal of a registered service as RFC 9457 problem details
//! (`application/problem+json`), with the codes agreed for the token API: `{"type":
//! "urn:oauth-broker:problem:<code>", "title", "status", "detail", "code", …extra}`. The token
//! exchange at `/token` answers the same refusals in RFC 6749 §5.2 shape
//! ([`Problem::oauth_error_body`]). Details are fixed sentences of ours or name values we
//! already validated; a token or secret never appears in one. Internal causes are logged, never
//! shown ([`Problem::server_error`]).

use axum::Json;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use url::Url;

use crate::broker::service_refusal::RequiredReason;
use crate::clock::Timestamp;
use crate::domain::Scopes;
use crate::store::StoreError;

/// The `type` of every problem is this followed by its code.
pub const TYPE_PREFIX: &str = "urn:oauth-broker:problem:";

/// One refusal. Build it with the constructor named after its code, which sets the status,
/// title and the members the contract requires.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub status: StatusCode,
    /// Stable, machine readable: `authorization_required`, `invalid_client`, …
    pub code: &'static str,
    /// Fixed per code.
    pub title: &'static str,
    /// This occurrence, for a human.
    pub detail: String,
    /// Members beyond RFC 9457's (`reason`, `authorization`, `retry_after`, …).
    pub extra: Map<String, Value>,
}

/// The authorization the user must complete, as the problem names it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AuthorizationLink {
    /// The authorization's id (`GET /v1/authorizations/{id}`).
    pub id: String,
    /// Where to send the user.
    pub url: Url,
    pub expires_at: Timestamp,
}

impl Problem {
    fn new(status: StatusCode, code: &'static str, title: &'static str, detail: impl Into<String>) -> Self {
        Self { status, code, title, detail: detail.into(), extra: Map::new() }
    }

    /// Adds a member; the RFC 9457 members and `code` cannot be overridden this way.
    pub fn with(mut self, name: &str, value: impl serde::Serialize) -> Self {
        self.extra.insert(name.to_owned(), serde_json::to_value(value).unwrap_or(Value::Null));
        self
    }

    /// 409: the user must connect, reconnect or consent first, at `authorization.url`.
    pub fn authorization_required(
        reason: RequiredReason,
        missing_scopes: Option<&Scopes>,
        authorization: &AuthorizationLink,
    ) -> Self {
        let detail = match reason {
            RequiredReason::NotConnected => "The user has not connected this provider yet.",
            RequiredReason::NeedsReconsent => "The user must sign in at the provider again.",
            RequiredReason::MissingScopes => "The connection lacks scopes that were asked for.",
            RequiredReason::ConsentRequired => "The user has not allowed this service to use the connection.",
        };
        let problem = Self::new(StatusCode::CONFLICT, "authorization_required", "User authorization required", detail)
            .with("reason", reason);
        let problem = match missing_scopes {
            Some(scopes) => problem.with("missing_scopes", scopes),
            None => problem,
        };
        problem.with("authorization", authorization)
    }

    /// 503 with `Retry-After`: the provider failed or is rate limiting; try again later.
    pub fn provider_unavailable(retry_after_seconds: u64) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "provider_unavailable",
            "Provider unavailable",
            "The provider did not answer usably; try again later.",
        )
        .with("retry_after", retry_after_seconds)
    }

    /// 503 with `Retry-After`: the database is away for a moment (as bearer authentication
    /// answers); nothing is wrong with the request.
    pub fn database_unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            "Temporarily unavailable",
            "The broker's database is temporarily unavailable; try again shortly.",
        )
        .with("retry_after", crate::store::unavailable::RETRY_AFTER_SECONDS)
    }

    /// 403: the service may not do this (provider not given to it, a raw token asked by a
    /// proxy-only service, a user named by an untrusted service).
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", "Forbidden", detail)
    }

    /// 401 with `WWW-Authenticate: Basic`: the service's credentials are missing or wrong. One
    /// answer for every cause, so it reveals nothing about which services exist.
    pub fn invalid_client() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "invalid_client", "Invalid client", "Service authentication failed.")
    }

    /// 401: the user's access token is invalid, expired, or for another audience.
    pub fn invalid_subject_token() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "invalid_subject_token",
            "Invalid subject token",
            "The user's access token is invalid, expired or not meant for this service.",
        )
    }

    /// 404: no provider by that id is configured.
    pub fn unknown_provider() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "unknown_provider",
            "Unknown provider",
            "No provider by that id is configured.",
        )
    }

    /// 404: no authorization by that id was caused by this service.
    pub fn unknown_authorization() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "unknown_authorization",
            "Unknown authorization",
            "No authorization by that id belongs to this service.",
        )
    }

    /// 404: no endpoint of the token API has this path.
    pub fn unknown_path() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "Not found",
            "No endpoint of the token API has this path; /v1/openapi.json lists them.",
        )
    }

    /// 400: the request is malformed.
    pub fn invalid_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", "Invalid request", detail)
    }

    /// 400: a scope is malformed or not one the service may ask for.
    pub fn invalid_scope(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_scope", "Invalid scope", detail)
    }

    /// 429 with `Retry-After`: a limit of the token API (`crate::identity::service_limits`,
    /// `crate::api::wait_slots`) is reached; `limit` says which: `requests`, `open_waits` or
    /// `failed_authentication`.
    pub fn rate_limited(retry_after_seconds: u64, limit: &'static str) -> Self {
        let detail = match limit {
            "open_waits" => "Too many waits are open for this service; try again when one ends.",
            "failed_authentication" => "Too many failed authentications from this address; try again later.",
            _ => "This service's request budget is used up; try again later.",
        };
        Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "Too many requests", detail)
            .with("limit", limit)
            .with("retry_after", retry_after_seconds.max(1))
    }

    /// 500: something failed inside the broker; the caller logs the cause, the answer says nothing.
    pub fn server_error() -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", "Internal error", "The broker failed; try again.")
    }

    /// The problem document.
    pub fn body(&self) -> Value {
        let mut body = self.extra.clone();
        body.insert("type".into(), Value::String(format!("{TYPE_PREFIX}{}", self.code)));
        body.insert("title".into(), self.title.into());
        body.insert("status".into(), self.status.as_u16().into());
        body.insert("detail".into(), self.detail.clone().into());
        body.insert("code".into(), self.code.into());
        Value::Object(body)
    }

    /// The same refusal in RFC 6749 §5.2 shape, for `/token`: `error` is the code, with the
    /// same extra members.
    pub fn oauth_error_body(&self) -> Value {
        let mut body = self.extra.clone();
        body.insert("error".into(), self.code.into());
        body.insert("error_description".into(), self.detail.clone().into());
        Value::Object(body)
    }

    /// The headers that go with the code (also for `/token`'s answers).
    pub fn add_headers(&self, response: &mut Response) {
        let headers = response.headers_mut();
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if self.code == "invalid_client" {
            headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"oauth-broker\""));
        }
        if let Some(seconds) = self.extra.get("retry_after").and_then(Value::as_u64) {
            headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
        }
    }
}

impl From<StoreError> for Problem {
    fn from(error: StoreError) -> Self {
        if crate::store::unavailable::is_unavailable(&error) {
            tracing::warn!(%error, "token API: database unavailable; the caller is told to retry");
            return Self::database_unavailable();
        }
        tracing::error!(%error, "token API: database error");
        Self::server_error()
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        self.add_headers(&mut response);
        response
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    async fn parts(problem: Problem) -> (StatusCode, axum::http::HeaderMap, Value) {
        let response = problem.into_response();
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        (parts.status, parts.headers, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn a_problem_is_rfc_9457_json_with_its_code() {
        let (status, headers, body) = parts(Problem::forbidden("This service was not given github.")).await;
        assert_eq!(status, 403);
        assert_eq!(headers[CONTENT_TYPE], "application/problem+json");
        assert_eq!(headers[CACHE_CONTROL], "no-store");
        assert_eq!(
            body,
            json!({"type": "urn:oauth-broker:problem:forbidden", "title": "Forbidden", "status": 403,
                   "detail": "This service was not given github.", "code": "forbidden"})
        );
    }

    #[tokio::test]
    async fn authorization_required_names_the_reason_and_the_link() {
        let link = AuthorizationLink {
            id: "a1".into(),
            url: Url::parse("https://broker.example/connect/a1").unwrap(),
            expires_at: 1000,
        };
        let missing = Scopes::parse(["repo", "gist"]).unwrap();
        let problem = Problem::authorization_required(RequiredReason::MissingScopes, Some(&missing), &link);
        let (status, _, body) = parts(problem.clone()).await;
        assert_eq!(status, 409);
        assert_eq!(body["code"], "authorization_required");
        assert_eq!(body["reason"], "missing_scopes");
        assert_eq!(body["missing_scopes"], json!(["gist", "repo"]));
        assert_eq!(
            body["authorization"],
            json!({"id": "a1", "url": "https://broker.example/connect/a1", "expires_at": 1000})
        );
        let oauth = problem.oauth_error_body();
        assert_eq!(oauth["error"], "authorization_required");
        assert_eq!(oauth["reason"], "missing_scopes");
        assert_eq!(oauth["authorization"]["id"], "a1");
        let plain = Problem::authorization_required(RequiredReason::NotConnected, None, &link);
        assert!(!plain.extra.contains_key("missing_scopes"));
    }

    #[tokio::test]
    async fn invalid_client_asks_for_basic_and_provider_unavailable_says_when_to_retry() {
        let (status, headers, body) = parts(Problem::invalid_client()).await;
        assert_eq!(status, 401);
        assert_eq!(headers[WWW_AUTHENTICATE], "Basic realm=\"oauth-broker\"");
        assert_eq!(body["type"], "urn:oauth-broker:problem:invalid_client");
        let (status, headers, body) = parts(Problem::provider_unavailable(30)).await;
        assert_eq!(status, 503);
        assert_eq!(headers[RETRY_AFTER], "30");
        assert_eq!(body["retry_after"], 30);
        assert!(!headers.contains_key(WWW_AUTHENTICATE));
    }

    #[tokio::test]
    async fn every_code_has_its_status_and_extra_members_cannot_replace_the_standard_ones() {
        for (problem, status, code) in [
            (Problem::invalid_subject_token(), 401, "invalid_subject_token"),
            (Problem::unknown_provider(), 404, "unknown_provider"),
            (Problem::unknown_authorization(), 404, "unknown_authorization"),
            (Problem::invalid_request("x"), 400, "invalid_request"),
            (Problem::invalid_scope("x"), 400, "invalid_scope"),
            (Problem::server_error(), 500, "server_error"),
        ] {
            let (got, _, body) = parts(problem.with("code", "other").with("status", 200)).await;
            assert_eq!((got.as_u16(), body["status"].as_u64()), (status, Some(u64::from(status))), "{code}");
            assert_eq!(body["code"], code);
            assert_eq!(body["type"], format!("{TYPE_PREFIX}{code}"));
        }
    }
}
