//! The built-in demo provider (a strict OAuth 2.1 authorization server plus a small API).

use axum::Router;

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
}
