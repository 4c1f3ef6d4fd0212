//! The signed-in top bar on error pages, for every face's pages: a layer around the whole app.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::message::{MessagePage, ShownMessage};
use super::render::render;
use super::signed_in::SignedIn;
use crate::identity::browser;
use crate::state::AppState;

/// Error pages keep the signed-in top bar (home, My connections, Sign out): a handler that
/// fails often has no session at hand (or failed before reading it), so the page it returned is
/// rendered again here, with the bar, when the request's cookie names a live session. Only
/// message pages are looked at; every other response passes untouched.
pub async fn top_bar_on_error_pages(State(state): State<AppState>, request: Request, next: Next) -> Response {
    // Only the cookie matters; a request without one (an API or MCP client) copies nothing.
    let mut cookies = HeaderMap::new();
    for value in request.headers().get_all(header::COOKIE) {
        cookies.append(header::COOKIE, value.clone());
    }
    let response = next.run(request).await;
    if cookies.is_empty() {
        return response;
    }
    let Some(ShownMessage(page)) = response.extensions().get::<ShownMessage>().cloned() else { return response };
    if page.signed_in.is_some() {
        return response;
    }
    let session = match browser::current(&state.identity, &cookies).await {
        Ok(Some(session)) => session,
        Ok(None) => return response,
        Err(error) => {
            tracing::warn!(%error, "could not read the browser session for an error page's top bar");
            return response;
        }
    };
    let page = MessagePage { signed_in: Some(SignedIn::of(&session)), ..(*page).clone() };
    let (parts, _) = response.into_parts();
    Response::from_parts(parts, render(StatusCode::OK, &page).into_body())
}
