//! The MCP server.

pub mod sessions;

use axum::Router;

use crate::state::AppState;

pub fn router(_state: AppState) -> Router<AppState> {
    Router::new()
}
