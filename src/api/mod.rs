//! The token API: the broker's face for registered tool servers ("services", `admin services
//! add`). A service authenticates with HTTP Basic ([`authenticated_service`], through
//! [`crate::identity::service_auth`]), names the user with the user's own access token for it
//! (or a user id, if trusted: [`crate::broker::service_acting`]) and asks the core for that
//! user's provider token ([`crate::broker::service_access`]); refusals are RFC 9457 problems
//! ([`crate::problem`]). The same question as an RFC 8693 token exchange is answered at the
//! authorization server's `/token` (`crate::authorization_server::token_exchange`), with the same
//! checks and the same codes; this API documents it ([`openapi`]).
//!
//! ```text
//! POST /v1/tokens          JSON → provider token | authorization_required | …  (tokens)
//! GET  /v1/connections                    the user's connections and their status (connections)
//! GET  /v1/authorizations/{id}[?wait=N]   status, long-poll                    (authorizations)
//! GET  /v1/authorizations/{id}/events     status as server-sent events
//! ANY  /v1/proxy/{provider}/{path}        the provider's API, token added     (proxy)
//! GET  /v1/openapi.json                   this API, generated from the code   (openapi)
//! ```
//!
//! Every request takes from its service's budget (`crate::identity::service_limits`) and every
//! wait holds a slot ([`wait_slots`]), counted in the database so the limits hold across
//! instances.
//!
//! The decision is the core's ([`crate::broker::access`]), the same one the MCP tools get; this
//! face only renders it.

pub mod authenticated_service;
pub mod authorizations;
pub mod connections;
pub mod headers;
pub mod openapi;
mod openapi_extra;
pub mod proxy;
pub mod tokens;
pub mod wait_slots;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{any, get, post};

use crate::state::AppState;

/// Largest request body the proxy forwards (and any other /v1 request).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The token API's routes (`/v1/…`); `/token`'s exchange grant is the authorization server's
/// (`crate::authorization_server::token_exchange`).
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/tokens", post(tokens::create))
        .route("/v1/connections", get(connections::list))
        .route("/v1/authorizations/{id}", get(authorizations::show))
        .route("/v1/authorizations/{id}/events", get(authorizations::events))
        .route("/v1/proxy/{provider}/{*path}", any(proxy::forward))
        .route("/v1/openapi.json", get(openapi::document))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}
