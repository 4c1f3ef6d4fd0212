//! `POST /connections/reconnect`: the connections page's Reconnect button, offered where the
//! core's status says the connection is dead or its refresh keeps failing. It opens
//! the same authorization a tool would ([`connections::reconnect`]) and sends the browser to its
//! `/connect/{id}` page, where the usual checks apply (same user, consent, provider).
//!
//! The form carries the session's CSRF token, and the grant is looked up among this user's own
//! rows, so another user's grant id reconnects nothing.

use axum::Form;
use axum::extract::State;
use axum::extract::rejection::FormRejection;
use axum::http::StatusCode;
use axum::response::Response;

use super::connections::{BACK, PostedForm, checked};
use crate::broker::connections;
use crate::html::{self, PageError};
use crate::identity::browser::OptionalBrowserSession;
use crate::state::AppState;

#[derive(serde::Deserialize)]
pub struct ReconnectForm {
    csrf_token: String,
    grant_id: String,
}

impl PostedForm for ReconnectForm {
    fn csrf_token(&self) -> &str {
        &self.csrf_token
    }
}

pub async fn reconnect(
    State(state): State<AppState>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    form: Result<Form<ReconnectForm>, FormRejection>,
) -> Result<Response, PageError> {
    let (session, form) = checked(session, form)?;
    let grants = state.core.store.grants().for_user(&session.user.id).await?;
    let Some(grant) = grants.iter().find(|g| g.id == form.grant_id) else {
        return Err(PageError::page(
            StatusCode::NOT_FOUND,
            "Not found",
            "That connection does not exist (any more), so there is nothing to reconnect.",
            BACK,
        ));
    };
    let Some(provider) = state.core.providers.find(&grant.provider) else {
        return Err(PageError::page(
            StatusCode::CONFLICT,
            "Provider not configured",
            "This provider is no longer configured on this broker, so the connection cannot be renewed.",
            "Ask the broker's operator about it.",
        ));
    };
    match connections::reconnect(&state.core, &provider, grant).await? {
        Some(authorization) => Ok(html::see_other(&format!("/connect/{}", authorization.id))),
        None => Err(PageError::page(
            StatusCode::CONFLICT,
            "Reconnect from your app",
            format!(
                "No app is allowed to use this {} connection any more, so it cannot be renewed from here.",
                provider.display_name
            ),
            "Use the app that needs it: it asks you to connect again, on this broker's pages.",
        )),
    }
}
