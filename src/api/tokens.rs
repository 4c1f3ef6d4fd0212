//! `POST /v1/tokens`: a user's provider token for a service, or what the user must do first.
//!
//! The core decides ([`crate::broker::service_access::decide`]: the token API's checks, then the
//! same access decision the MCP tools get); this face renders its answer as JSON or a
//! [`Problem`].

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};

use super::authenticated_service::AuthenticatedService;
use crate::broker::service_access::{self, Purpose, TokenAsk};
use crate::broker::service_acting::Subject;
use crate::broker::tokens::AccessToken;
use crate::config::ProviderConfig;
use crate::problem::Problem;
use crate::state::AppState;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    /// The user's access token, issued for this service's registered resource.
    #[serde(default)]
    pub subject_token: Option<String>,
    /// A user id instead of a token (services registered with `--trusted` only).
    #[serde(default)]
    pub user_id: Option<String>,
    /// The provider's id, e.g. `github`.
    pub provider: String,
    /// Scopes the token must carry (the provider's own names).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Which of the user's accounts at the provider (as `list_connections` names it); the most
    /// recently used one when absent.
    #[serde(default)]
    pub account: Option<String>,
}

/// A usable provider access token. Never log it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct TokenResponse {
    pub access_token: String,
    /// `Bearer`; `api_key` when the provider takes an API key the user entered (then
    /// `access_token` is that key, to be sent as `send_as` says).
    pub token_type: &'static str,
    /// Unix seconds; absent when the provider gave no lifetime.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    pub scopes: Vec<String>,
    pub provider: String,
    /// The provider's name for the account, when it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// For `token_type = api_key`: how the provider wants the key sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_as: Option<SendAs>,
}

/// How an API key is sent: in `header`, after `scheme` when there is one (`Basic …` means HTTP
/// Basic with the key where it says).
#[derive(Serialize, utoipa::ToSchema)]
pub struct SendAs {
    pub header: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
}

/// Get a user's provider access token.
#[utoipa::path(
    post, path = "/v1/tokens", tag = "tokens",
    request_body = TokenRequest,
    security(("service" = [])),
    responses(
        (status = 200, description = "A fresh access token", body = TokenResponse),
        (status = 409, description = "authorization_required: send the user to `authorization.url`", content_type = "application/problem+json"),
        (status = 503, description = "provider_unavailable: retry after `retry_after` seconds", content_type = "application/problem+json"),
        (status = 403, description = "forbidden", content_type = "application/problem+json"),
        (status = 401, description = "invalid_client or invalid_subject_token", content_type = "application/problem+json"),
        (status = 404, description = "unknown_provider", content_type = "application/problem+json"),
        (status = 400, description = "invalid_request or invalid_scope", content_type = "application/problem+json"),
        (status = 429, description = "rate_limited: retry after `retry_after` seconds", content_type = "application/problem+json"),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    AuthenticatedService(service): AuthenticatedService,
    body: Result<Json<TokenRequest>, JsonRejection>,
) -> Response {
    let Json(request) = match body {
        Ok(body) => body,
        Err(rejection) => return Problem::invalid_request(rejection.body_text()).into_response(),
    };
    let subject = match Subject::from_parts(request.subject_token.as_deref(), request.user_id.as_deref()) {
        Ok(subject) => subject,
        Err(refusal) => return Problem::from(refusal).into_response(),
    };
    let asked = TokenAsk { provider: &request.provider, scopes: &request.scopes, account: request.account.as_deref() };
    match service_access::decide(&state.core, &state.identity, &service, subject, asked, Purpose::RawToken).await {
        Ok(token) => {
            let provider = state.core.providers.find(&token.grant.provider);
            let mut response = Json(token_response(&token, provider.as_deref())).into_response();
            response
                .headers_mut()
                .insert(axum::http::header::CACHE_CONTROL, axum::http::HeaderValue::from_static("no-store"));
            response
        }
        Err(refusal) => Problem::from(refusal).into_response(),
    }
}

pub fn token_response(token: &AccessToken, provider: Option<&ProviderConfig>) -> TokenResponse {
    let key = provider.and_then(|p| p.api_key.as_ref());
    TokenResponse {
        access_token: token.token.expose_secret().to_owned(),
        token_type: if key.is_some() { "api_key" } else { "Bearer" },
        send_as: key.map(|spec| {
            let (header, scheme) = spec.describe();
            SendAs { header, scheme }
        }),
        expires_at: token.grant.expires_at,
        scopes: token.grant.scopes.iter().map(str::to_owned).collect(),
        provider: token.grant.provider.clone(),
        account: token.grant.account_label.clone(),
    }
}
