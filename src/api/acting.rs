//! Whom a service acts for, and for which provider: the checks every token-API request makes
//! before the core is asked anything.
//!
//! A service proves the user with that user's own access token, issued for the service's
//! registered resource (RFC 8693 `subject_token`; RFC 8707 audience): a token the user's MCP
//! client obtained for *this* tool server, so a service can never act for a user who did not
//! come through it. Only a service the operator marked `--trusted` may name a user id instead.

use crate::config::ProviderConfig;
use crate::identity::bearer::{self, Rejection};
use crate::state::AppState;
use crate::store::token_api::ServiceRow;

use super::problem::Problem;

/// How the request names the user.
#[derive(Clone, Copy)]
pub enum Subject<'a> {
    /// The user's access token (never logged, never echoed).
    Token(&'a str),
    /// A user id (trusted services only).
    UserId(&'a str),
}

impl<'a> Subject<'a> {
    /// Exactly one of the two, or `invalid_request`.
    pub fn from_parts(token: Option<&'a str>, user_id: Option<&'a str>) -> Result<Self, Problem> {
        match (token.filter(|t| !t.is_empty()), user_id.filter(|u| !u.is_empty())) {
            (Some(token), None) => Ok(Subject::Token(token)),
            (None, Some(user_id)) => Ok(Subject::UserId(user_id)),
            (Some(_), Some(_)) => {
                Err(Problem::invalid_request("send either the user's access token or a user id, not both"))
            }
            (None, None) => Err(Problem::invalid_request("the user's access token (subject_token) is required")),
        }
    }
}

/// The user id the service may act for.
pub async fn user_for(state: &AppState, service: &ServiceRow, subject: Subject<'_>) -> Result<String, Problem> {
    match subject {
        Subject::Token(token) => {
            let Some(resource) = &service.resource else {
                return Err(Problem::forbidden(
                    "this service has no registered resource, so no user token can be meant for it; \
                     ask the operator to register it with --resource",
                ));
            };
            if bearer::is_own_audience(&state.identity, resource.as_str()) {
                tracing::error!(service = %service.id, "token API: the service's resource is the broker's own audience");
                return Err(Problem::forbidden(
                    "this service's registered resource is the broker's own; ask the operator to register the \
                     tool server's own URL",
                ));
            }
            match bearer::authenticate_for_audience(&state.identity, token, resource.as_str()).await {
                Ok(user) => Ok(user.user_id),
                Err(Rejection::Unavailable) => Err(Problem::server_error()),
                Err(rejection) => {
                    tracing::info!(service = %service.id, ?rejection, "token API: subject token refused");
                    Err(Problem::invalid_subject_token())
                }
            }
        }
        Subject::UserId(user_id) => {
            if !service.trusted {
                return Err(Problem::forbidden(
                    "only a trusted service may name a user; present the user's access token instead",
                ));
            }
            match state.core.store.users().by_id(user_id).await? {
                Some(user) if user.is_disabled() => Err(Problem::invalid_request("user_id names a disabled user")),
                Some(user) => Ok(user.id),
                None => Err(Problem::invalid_request("user_id names no user")),
            }
        }
    }
}

/// The provider, if configured and given to this service.
pub fn provider_for(
    state: &AppState,
    service: &ServiceRow,
    provider: &str,
) -> Result<std::sync::Arc<ProviderConfig>, Problem> {
    let provider = state.core.providers.find(provider).ok_or_else(Problem::unknown_provider)?;
    if !service.allows(&provider.id) {
        return Err(Problem::forbidden(format!(
            "this service was not given the provider {}; the operator can add it",
            provider.id
        )));
    }
    Ok(provider)
}
