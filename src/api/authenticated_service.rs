//! The service a token-API request comes from: authenticated by identity
//! ([`crate::identity::service_auth`]: HTTP Basic, the lockout and the request budget), its
//! refusal worded as a problem ([`Problem`]).

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::request::Parts;

use crate::identity::service_auth;
use crate::problem::Problem;
use crate::state::AppState;
use crate::store::token_api::ServiceRow;

/// The service whose credentials `headers` carry, with one request taken from its budget;
/// `invalid_client` (counted against `address`), or 429 when the address is locked for failed
/// authentications or the service's budget is used up; 500 only when the database fails.
pub async fn authenticate_service(state: &AppState, headers: &HeaderMap, address: &str) -> Result<ServiceRow, Problem> {
    service_auth::authenticate(&state.identity, headers, address).await.map_err(Problem::from)
}

/// The authenticated service, for handlers: `AuthenticatedService(service): AuthenticatedService`.
/// Rejects with [`Problem::invalid_client`] or 429 ([`authenticate_service`]).
#[derive(Debug, Clone)]
pub struct AuthenticatedService(pub ServiceRow);

impl FromRequestParts<AppState> for AuthenticatedService {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let crate::net::ClientIp(address) =
            crate::net::ClientIp::from_request_parts(parts, state).await.unwrap_or_else(|never| match never {});
        authenticate_service(state, &parts.headers, &address).await.map(AuthenticatedService)
    }
}
