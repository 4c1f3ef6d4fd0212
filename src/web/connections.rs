//! `GET /connections`: the signed-in user's connections, each with a Revoke button, and
//! `POST /logout/everywhere` (end every browser session of this user).
//!
//! Revoking here is the same as `disconnect_account`: the tokens are revoked at the provider
//! (RFC 7009) and deleted. Every form carries the session's CSRF token, and a grant id posted
//! back is looked up among this user's own grants, so another user's id revokes nothing.

use axum::Form;
use axum::extract::State;
use axum::extract::rejection::FormRejection;
use axum::http::{StatusCode, header};
use axum::response::Response;

use super::error::PageError;
use super::pages::{self, ConnectionRow, ConnectionsPage};
use crate::identity::browser::{self, OptionalBrowserSession};
use crate::state::AppState;

pub async fn show(
    State(state): State<AppState>,
    OptionalBrowserSession(session): OptionalBrowserSession,
) -> Result<Response, PageError> {
    let Some(session) = session else { return Ok(pages::see_other("/login?next=/connections")) };
    let grants = state.store.grants_for_user(&session.user.id).await?;
    let rows = grants
        .iter()
        .map(|g| ConnectionRow {
            grant_id: g.id.clone(),
            provider: state
                .providers
                .find(&g.provider)
                .map(|p| p.display_name.clone())
                .unwrap_or_else(|| g.provider.clone()),
            account: g.account_label.clone().unwrap_or_else(|| "—".into()),
            scopes: g.scopes.clone(),
            status: if g.status == "active" { "connected".into() } else { "needs a new consent".into() },
        })
        .collect();
    Ok(pages::render(
        StatusCode::OK,
        &ConnectionsPage { username: session.display_name().to_owned(), csrf_token: session.csrf_token.clone(), rows },
    ))
}

#[derive(serde::Deserialize)]
pub struct RevokeForm {
    csrf_token: String,
    grant_id: String,
}

pub async fn revoke(
    State(state): State<AppState>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    form: Result<Form<RevokeForm>, FormRejection>,
) -> Result<Response, PageError> {
    let Some(session) = session else { return Ok(pages::see_other("/login?next=/connections")) };
    let Ok(Form(form)) = form else { return Err(PageError::bad_request()) };
    if !super::csrf::session_token_matches(&session, &form.csrf_token) {
        return Err(PageError::csrf());
    }
    let grants = state.store.grants_for_user(&session.user.id).await?;
    let Some(grant) = grants.iter().find(|g| g.id == form.grant_id) else {
        return Err(PageError::page(StatusCode::NOT_FOUND, "Not found", "That connection does not exist (any more)."));
    };
    let Some(provider) = state.providers.find(&grant.provider) else {
        return Err(PageError::page(
            StatusCode::CONFLICT,
            "Provider not configured",
            "This provider is no longer configured; ask the operator to remove the connection.",
        ));
    };
    crate::oauth::tokens::disconnect_grant(&state, provider, grant).await.map_err(PageError::internal)?;
    tracing::info!(user_id = %session.user.id, provider = %grant.provider, "connection revoked from the connections page");
    Ok(pages::see_other("/connections"))
}

#[derive(serde::Deserialize)]
pub struct EverywhereForm {
    csrf_token: String,
}

/// Ends every browser session of this user (a lost laptop, a shared computer).
pub async fn logout_everywhere(
    State(state): State<AppState>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    form: Result<Form<EverywhereForm>, FormRejection>,
) -> Result<Response, PageError> {
    let Some(session) = session else { return Ok(pages::see_other("/login")) };
    let Ok(Form(form)) = form else { return Err(PageError::bad_request()) };
    if !super::csrf::session_token_matches(&session, &form.csrf_token) {
        return Err(PageError::csrf());
    }
    let ended = state.store.delete_browser_sessions_for_user(&session.user.id).await?;
    state
        .store
        .audit(
            state.now(),
            Some(&session.user.id),
            "browser.signed_out_everywhere",
            None,
            Some(&format!("sessions={ended}")),
        )
        .await?;
    let mut response = pages::see_other("/login");
    response.headers_mut().append(header::SET_COOKIE, browser::clear_cookie(&state));
    Ok(response)
}
