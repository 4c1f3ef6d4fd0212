//! Hosted pages (askama templates in `templates/`): sign-in, connect/consent, OAuth callback.

pub mod security_headers;

use axum::Router;

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
}
