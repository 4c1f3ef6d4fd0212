//! The token API: the broker's face for registered tool servers ("services", `admin services
//! add`). A service authenticates with HTTP Basic ([`service_auth`]), names the user with the
//! user's own access token for it (or a user id, if trusted: [`acting`]) and asks the core for
//! that user's provider token; refusals are RFC 9457 problems ([`problem`]).
//!
//! ```text
//! POST /token              RFC 8693 token exchange → provider token            (exchange)
//! POST /v1/tokens          JSON → provider token | authorization_required | …  (tokens)
//! GET  /v1/connections                    the user's connections and their status (connections)
//! GET  /v1/authorizations/{id}[?wait=N]   status, long-poll                    (authorizations)
//! GET  /v1/authorizations/{id}/events     status as server-sent events
//! ANY  /v1/proxy/{provider}/{path}        the provider's API, token added     (proxy)
//! GET  /v1/openapi.json                   this API, generated from the code   (openapi)
//! ```
//!
//! Every request takes from its service's budget and every wait holds a slot, counted in the
//! database so the limits hold across instances ([`limits`]).
//!
//! The decision is the core's ([`crate::broker::access`]), the same one the MCP tools get; this
//! face only renders it.

pub mod acting;
pub mod authorizations;
pub mod connections;
pub mod exchange;
pub mod headers;
pub mod limits;
pub mod openapi;
mod openapi_extra;
pub mod problem;
pub mod proxy;
pub mod service_auth;
pub mod tokens;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{any, get, post};

use crate::state::AppState;

/// Largest request body the proxy forwards (and any other /v1 request).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The token API's routes (`/v1/…`); `/token`'s exchange grant is dispatched by the token
/// endpoint ([`crate::authorization_server::token`]).
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
