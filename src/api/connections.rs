//! `GET /v1/connections`: where the user's connections to the providers this service may use
//! stand — so a tool server can tell its user "reconnect GitHub" before a call fails,
//! or see that a refresh is failing and when it is retried. Never a token.
//!
//! The user is named as on the other token-API endpoints ([`crate::broker::service_acting`]): the user's access
//! token for this service in `X-Subject-Token` (a header, never the query string: a token in a
//! URL ends up in logs), or — for a trusted service only — `user_id` (query) or `X-User-Id`.
//! Each entry's status is the core's ([`crate::broker::connection_status::Status`]), for this
//! service as a client: `consent_required` until the user allowed it, `missing_scopes` relative
//! to the `scopes` it names.

use axum::Json;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::authenticated_service::AuthenticatedService;
use super::proxy::{SUBJECT_TOKEN_HEADER, USER_ID_HEADER};
use crate::broker::connections;
use crate::broker::service_acting::{Subject, provider_for, user_for};
use crate::domain::Scopes;
use crate::problem::Problem;
use crate::state::AppState;
use crate::store::token_api::ServiceRow;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ConnectionsQuery {
    /// Only this provider (one the service may use).
    #[serde(default)]
    pub provider: Option<String>,
    /// Space-separated scopes the service needs; a connection without all of them is
    /// `missing_scopes`.
    #[serde(default)]
    pub scopes: Option<String>,
    /// The user, by id (trusted services only); or send `X-User-Id`.
    #[serde(default)]
    pub user_id: Option<String>,
    /// Refused: send the user's token in `X-Subject-Token`, never in a URL.
    #[serde(default)]
    #[param(ignore)]
    pub subject_token: Option<String>,
}

/// One connection of the user, or one provider the user has not connected.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ConnectionEntry {
    /// The provider's id.
    pub provider: String,
    pub display_name: String,
    /// The provider's name for the account, when it gave one (absent when not connected).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// `ready`, `needs_reconsent`, `revoked`, `missing_scopes`, `refresh_failing`,
    /// `consent_required` or `not_connected`.
    pub status: &'static str,
    /// The scopes the connection carries.
    pub scopes: Vec<String>,
    /// With `missing_scopes`: the scopes asked for that it lacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_scopes: Option<Vec<String>>,
    /// When the access token expires (Unix seconds; the broker refreshes it as needed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// Why the last refresh failed: `rate_limited`, `server_error`, `timeout`, `unreachable`,
    /// `refused`, `invalid_grant`, `no_refresh_token`, `unreadable`, or `key_refused` (the
    /// provider refused an API key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_refresh_error: Option<&'static str>,
    /// While a failing refresh is held back: when it is tried again (Unix seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_refresh_at: Option<i64>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ConnectionsBody {
    pub connections: Vec<ConnectionEntry>,
}

/// Where the user's connections stand.
#[utoipa::path(
    get, path = "/v1/connections", tag = "connections",
    params(
        ConnectionsQuery,
        ("X-Subject-Token" = Option<String>, Header, description = "The user's access token for this service"),
        ("X-User-Id" = Option<String>, Header, description = "A user id instead (trusted services only)"),
    ),
    security(("service" = [])),
    responses(
        (status = 200, description = "The user's connections to the providers this service may use (never a token)", body = ConnectionsBody),
        (status = 400, description = "invalid_request (no user named, a token in the query string) or invalid_scope", content_type = "application/problem+json"),
        (status = 401, description = "invalid_client or invalid_subject_token", content_type = "application/problem+json"),
        (status = 403, description = "forbidden: a provider not given to this service, or a user id from an untrusted service", content_type = "application/problem+json"),
        (status = 404, description = "unknown_provider", content_type = "application/problem+json"),
        (status = 429, description = "rate_limited: retry after `retry_after` seconds", content_type = "application/problem+json"),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    AuthenticatedService(service): AuthenticatedService,
    headers: HeaderMap,
    query: Result<Query<ConnectionsQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return Problem::invalid_request("the query string could not be read").into_response();
    };
    match listing(&state, &service, &headers, &query).await {
        Ok(body) => {
            let mut response = Json(body).into_response();
            response
                .headers_mut()
                .insert(axum::http::header::CACHE_CONTROL, axum::http::HeaderValue::from_static("no-store"));
            response
        }
        Err(problem) => problem.into_response(),
    }
}

async fn listing(
    state: &AppState,
    service: &ServiceRow,
    headers: &HeaderMap,
    query: &ConnectionsQuery,
) -> Result<ConnectionsBody, Problem> {
    if query.subject_token.is_some() {
        // Already in someone's access log; at least it is not used, so nobody learns to send it.
        return Err(Problem::invalid_request(
            "send the user's access token in the X-Subject-Token header, never in the URL",
        ));
    }
    let header = |name: &str| super::headers::text(headers, name);
    let user_id = match (query.user_id.as_deref(), header(USER_ID_HEADER)?) {
        (Some(_), Some(_)) => return Err(Problem::invalid_request("name the user once: user_id or X-User-Id")),
        (Some(id), None) | (None, Some(id)) => Some(id),
        (None, None) => None,
    };
    let provider = match query.provider.as_deref() {
        Some(id) => Some(provider_for(&state.core, service, id)?),
        None => None,
    };
    let provider = provider.as_deref();
    let required = match query.scopes.as_deref() {
        Some(scopes) => Scopes::from_space_separated(scopes).map_err(|e| Problem::invalid_scope(e.to_string()))?,
        None => Scopes::default(),
    };
    let subject = Subject::from_parts(header(SUBJECT_TOKEN_HEADER)?, user_id)?;
    let user_id = user_for(&state.core, &state.identity, service, subject).await?;
    let client = service.client();
    let listing = connections::connections_requiring(&state.core, &user_id, Some(&client), &required).await?;
    let connections = listing
        .iter()
        .filter_map(|c| {
            // Only the providers this service may use, and only configured ones.
            let configured = c.provider.as_deref()?;
            if !service.allows(&configured.id) || provider.is_some_and(|p| p.id != configured.id) {
                return None;
            }
            let grant = c.grant.as_ref();
            let missing = match &c.state {
                crate::broker::connection_status::Status::MissingScopes { missing } => {
                    Some(missing.iter().map(str::to_owned).collect())
                }
                _ => None,
            };
            Some(ConnectionEntry {
                provider: configured.id.as_str().to_owned(),
                display_name: configured.display_name.clone(),
                account: grant.and_then(|g| g.account_label.clone()),
                status: c.state.code(),
                scopes: grant.map(|g| g.scopes.iter().map(str::to_owned).collect()).unwrap_or_default(),
                missing_scopes: missing,
                expires_at: grant.and_then(|g| g.expires_at),
                last_refresh_error: c.state.last_error().map(|e| e.as_str()),
                next_refresh_at: c.state.retry_at(),
            })
        })
        .collect();
    Ok(ConnectionsBody { connections })
}
