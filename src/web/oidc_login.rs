//! The browser sign-in with the OIDC issuer as pages: `GET /login/oidc?next=…` and
//! `GET /login/oidc/callback` (OIDC Core §3.1). What is checked and why lives in
//! [`crate::identity::oidc::browser_login`]; this face only sets the cookies it is handed,
//! redirects, and renders its refusals ([`PageError`]).

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde::Deserialize;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::html::{self, PageError};
use crate::identity::oidc::OidcContext;
use crate::identity::oidc::browser_login::{self, CALLBACK_PATH, CallbackQuery, LOGIN_PATH};
use crate::state::AppState;

/// The sign-in routes, when oidc mode is on (an empty router otherwise).
pub fn router(ctx: Option<Arc<OidcContext>>) -> Router<AppState> {
    let Some(ctx) = ctx else { return Router::new() };
    Router::new()
        .route(LOGIN_PATH, get(start))
        .route(CALLBACK_PATH, get(callback))
        .layer(Extension(ctx))
        .layer(SetResponseHeaderLayer::overriding(header::CACHE_CONTROL, HeaderValue::from_static("no-store")))
}

#[derive(Debug, Default, Deserialize)]
pub struct StartQuery {
    #[serde(default)]
    next: String,
}

// OIDC Core §3.1.2.1, RFC 7636 §4.3.
async fn start(
    State(state): State<AppState>,
    Extension(ctx): Extension<Arc<OidcContext>>,
    query: Result<Query<StartQuery>, QueryRejection>,
) -> Result<Response, PageError> {
    let next = query.map(|Query(q)| q.next).unwrap_or_default();
    let started = browser_login::start(&state.identity, &ctx, &next).await?;
    let mut response = html::see_other(started.location.as_str());
    response.headers_mut().append(header::SET_COOKIE, started.cookie);
    Ok(response)
}

// OIDC Core §3.1.2.5-§3.1.3.7, RFC 9207 §2.4.
async fn callback(
    State(state): State<AppState>,
    Extension(ctx): Extension<Arc<OidcContext>>,
    headers: HeaderMap,
    query: Result<Query<CallbackQuery>, QueryRejection>,
) -> Response {
    let mut response = match query {
        Err(_) => PageError::bad_request().into_response(),
        Ok(Query(query)) => match browser_login::finish(&state.identity, &ctx, &headers, query).await {
            Ok(signed_in) => {
                let mut response = html::see_other(&signed_in.next);
                response.headers_mut().append(header::SET_COOKIE, signed_in.cookie);
                response
            }
            Err(error) => PageError::from(error).into_response(),
        },
    };
    // Single use: whatever happened, this attempt is over.
    response.headers_mut().append(header::SET_COOKIE, browser_login::clear_pending(&ctx));
    response
}
