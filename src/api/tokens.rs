//! `POST /v1/tokens`: a user's provider token for a service, or what the user must do first.
//!
//! The core decides ([`crate::broker::access::access`], the same decision the MCP tools get);
//! this face renders its answer as JSON or a [`Problem`]. For consent a service is a client like
//! any other: the user allows *that tool server* to use a connection, on the same pages.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};

use super::acting::{Subject, provider_for, user_for};
use super::problem::{AuthorizationLink, Problem, RequiredReason};
use super::service_auth::AuthenticatedService;
use crate::broker::access::{self, Access, ConnectReason};
use crate::broker::authorizations::{self, Requester};
use crate::broker::tokens::AccessToken;
use crate::config::ProviderConfig;
use crate::domain::Scopes;
use crate::state::AppState;
use crate::store::audit::{Actor, AuditEvent, Outcome};
use crate::store::authorizations::AuthorizationRow;
use crate::store::token_api::ServiceRow;

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
        Err(problem) => return problem.into_response(),
    };
    let asked = TokenAsk { provider: &request.provider, scopes: &request.scopes, account: request.account.as_deref() };
    match token_for_service(&state, &service, subject, asked, Purpose::RawToken).await {
        Ok(token) => {
            let provider = state.core.providers.find(&token.grant.provider);
            let mut response = Json(token_response(&token, provider.as_deref())).into_response();
            response
                .headers_mut()
                .insert(axum::http::header::CACHE_CONTROL, axum::http::HeaderValue::from_static("no-store"));
            response
        }
        Err(problem) => problem.into_response(),
    }
}

/// Audits one token-API answer (`token_api.token` for a token that leaves the broker,
/// `token_api.proxy` for a call the broker makes for the service) and counts it in the metrics.
async fn used_by_service(
    state: &AppState,
    service: &ServiceRow,
    user_id: &str,
    provider: &str,
    purpose: Purpose,
    answer: &'static str,
    outcome: Outcome,
) -> Result<(), Problem> {
    let action = match purpose {
        Purpose::RawToken => "token_api.token",
        Purpose::Proxy => "token_api.proxy",
    };
    let detail = format!("answer={answer}");
    let event = AuditEvent::new(Actor::Service(&service.id), action, Some(user_id))
        .provider(Some(provider))
        .detail(Some(&detail))
        .outcome(outcome);
    // Batched: the request waits only for room on the queue (`store::token_api::audit_queue`).
    state.core.store.audit_queue().record(state.core.now(), event).await?;
    crate::telemetry::token_api_answer(answer);
    Ok(())
}

/// What a service asks for.
#[derive(Clone, Copy)]
pub struct TokenAsk<'a> {
    pub provider: &'a str,
    pub scopes: &'a [String],
    pub account: Option<&'a str>,
}

/// Whether the service will hold the token or the broker uses it on its behalf.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The token leaves the broker (`/v1/tokens`, token exchange): refused to proxy-only services.
    RawToken,
    /// The broker calls the provider itself (`/v1/proxy`).
    Proxy,
}

/// Every check of a token-API request, then the core's answer: a token, or a problem.
pub async fn token_for_service(
    state: &AppState,
    service: &ServiceRow,
    subject: Subject<'_>,
    asked: TokenAsk<'_>,
    purpose: Purpose,
) -> Result<AccessToken, Problem> {
    let provider = provider_for(state, service, asked.provider)?;
    let provider = &*provider;
    if purpose == Purpose::RawToken && service.proxy_only {
        return Err(Problem::forbidden(
            "this service is proxy-only: it calls providers through /v1/proxy and never holds a token",
        ));
    }
    let required = Scopes::parse(asked.scopes).map_err(|e| Problem::invalid_scope(e.to_string()))?;
    crate::providers::scopes::check(provider, &required).map_err(|e| Problem::invalid_scope(e.to_string()))?;
    let user_id = user_for(state, service, subject).await?;
    let client = service.client();
    let who = Requester { user_id: &user_id, client: &client, client_name: None, mcp_session: None, server: None };
    let answer = access::access(&state.core, &who, provider, asked.account, &required).await.map_err(|error| {
        tracing::error!(error = %crate::error_chain::Chain(&error), service = %service.id, "token API: access decision failed");
        Problem::server_error()
    })?;
    let used = |answer: &'static str, outcome: Outcome| {
        used_by_service(state, service, &user_id, provider.id.as_str(), purpose, answer, outcome)
    };
    let (reason, missing, row) = match answer {
        Access::Ready(token) => {
            used("issued", Outcome::Success).await?;
            return Ok(*token);
        }
        Access::Unavailable { retry_after } => {
            used("provider_unavailable", Outcome::Failure).await?;
            return Err(Problem::provider_unavailable(retry_after.as_secs()));
        }
        Access::Refused(why) => {
            tracing::warn!(service = %service.id, provider = %provider.id, %why, "token API: provider refused the refresh");
            used("provider_refused", Outcome::Failure).await?;
            let mut problem = Problem::provider_unavailable(access::RETRY_AFTER_UNAVAILABLE.as_secs());
            problem.detail = format!("{} refused to refresh the connection ({why}).", provider.display_name);
            return Err(problem);
        }
        Access::Connect { authorization, reason: ConnectReason::NotConnected } => {
            (RequiredReason::NotConnected, None, authorization)
        }
        Access::Connect { authorization, reason: ConnectReason::NeedsReconsent } => {
            (RequiredReason::NeedsReconsent, None, authorization)
        }
        Access::MoreScopes { authorization, missing } => (RequiredReason::MissingScopes, Some(missing), authorization),
        Access::AllowClient { authorization } => (RequiredReason::ConsentRequired, None, authorization),
    };
    let answer = match reason {
        RequiredReason::NotConnected => "not_connected",
        RequiredReason::NeedsReconsent => "needs_reconsent",
        RequiredReason::MissingScopes => "missing_scopes",
        RequiredReason::ConsentRequired => "consent_required",
    };
    used(answer, Outcome::Refused).await?;
    Err(authorization_required(state, provider, reason, missing.as_ref(), &row))
}

fn authorization_required(
    state: &AppState,
    provider: &ProviderConfig,
    reason: RequiredReason,
    missing: Option<&Scopes>,
    row: &AuthorizationRow,
) -> Problem {
    let link = AuthorizationLink {
        id: row.id.clone(),
        url: authorizations::connect_url(&state.core, &row.id),
        expires_at: row.expires_at,
    };
    Problem::authorization_required(reason, missing, &link).with("provider", provider.id.as_str())
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
