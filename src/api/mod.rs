//! The token API for registered tool servers ("services", `admin services add`): a service
//! authenticates with HTTP Basic ([`service_auth`]) and asks for a user's provider token or a
//! proxied call; refusals are RFC 9457 problems ([`problem`]).
//!
//! ```text
//! service ─ Basic svc_NAME:secret ─▶ /v1/…   service_auth → ServiceRow (store::services)
//!                                      │ the user's token (subject_token) or user_id (trusted)
//!                                      ▼ the core decides; this face renders JSON or a Problem
//! ```
//!
//! The endpoints are the agreed token API contract; [`router`] collects them.

pub mod problem;
pub mod service_auth;

use axum::Router;

use crate::state::AppState;

/// The token API's routes (`/v1/…`).
pub fn router() -> Router<AppState> {
    Router::new()
}
