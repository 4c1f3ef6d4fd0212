//! `GET /oauth/callback`: where providers send the browser back (RFC 6749 §4.1.2).
//!
//! The page shows only the outcome: no third-party resources or links (the URL carries a code;
//! RFC 9700 §4.2.4), `Referrer-Policy: no-referrer` from the security headers layer, and
//! `Cache-Control: no-store`. All checks live in [`crate::broker::flow::complete`].

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::error::PageError;
use super::pages;
use crate::broker::flow::{self, CallbackParams, FlowError};
use crate::identity::browser::OptionalBrowserSession;
use crate::state::AppState;

// RFC 6749 §4.1.2, RFC 9700 §4.4.2 and §4.5, RFC 9207 §2.4.
/// `GET /oauth/callback?code&state&iss` (or `error&error_description`).
pub async fn receive(
    State(state): State<AppState>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    query: Result<Query<CallbackParams>, QueryRejection>,
) -> Result<Response, PageError> {
    // An unparseable query (a repeated parameter, say) is treated like a missing state.
    let Ok(Query(params)) = query else { return Err(FlowError::UnknownState.into()) };
    let connected = flow::complete(&state, &params, session.as_ref()).await?;
    Ok(pages::message(
        StatusCode::OK,
        format!("Connected to {}", connected.provider_name),
        format!("Connected to {}. You can close this tab and return to your client.", connected.provider_name),
    ))
}
