//! Bearer tokens on /mcp.

use axum::Router;

use crate::state::AppState;

pub fn metadata_router() -> Router<AppState> {
    Router::new()
}
