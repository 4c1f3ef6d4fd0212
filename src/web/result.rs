//! `GET /connect/{id}/result`: how a connect link ended, for its owner only.
//!
//! The provider's callback redirects here ([`super::callback`]), so the address bar and history
//! keep this clean URL instead of the code and state. A signed-out browser is sent to sign in
//! first (the id is not even looked up), and another account gets the same "Link not valid" as
//! an unknown id: neither learns whether the link exists or how it ended.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::connect::{attempt_failed, parse_id};
use crate::broker::flow::{self, FlowError};
use crate::html::{self, MessagePage, PageError, START_AGAIN, SignedIn};
use crate::identity::browser::OptionalBrowserSession;
use crate::state::AppState;
use crate::store::authorizations::{AuthorizationKind, AuthorizationStatus};

const BACK: &str =
    "Return to your MCP client: it carries on by itself (or call the tool again there). You can close this tab.";

pub async fn show(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    OptionalBrowserSession(session): OptionalBrowserSession,
) -> Result<Response, PageError> {
    let id = parse_id(path)?;
    let session = session.ok_or_else(|| PageError::SignIn { next: format!("/connect/{id}/result") })?;
    let row = state
        .core
        .store
        .authorizations()
        .by_id(id.as_str())
        .await?
        .filter(|row| row.user_id == session.user.id)
        .ok_or_else(PageError::not_found)?;
    let provider =
        state.core.providers.find(&row.provider).map_or_else(|| row.provider.clone(), |p| p.display_name.clone());
    let (title, message, next_step) = match (row.status, row.kind) {
        (AuthorizationStatus::Completed, AuthorizationKind::Connect) => (
            format!("Connected to {provider}"),
            format!("Your {provider} account is connected, and the client that asked may use it."),
            BACK.to_owned(),
        ),
        (AuthorizationStatus::Completed, AuthorizationKind::Consent) => (
            "Allowed".to_owned(),
            format!(
                "The client may now use your {provider} connection. You can withdraw that any time on My connections."
            ),
            BACK.to_owned(),
        ),
        (AuthorizationStatus::Completed, AuthorizationKind::Server) => (
            "Allowed".to_owned(),
            format!(
                "The client may now call the server {}. You can withdraw that any time on My connections.",
                crate::display::safe_text(crate::broker::gateway_consent::server_named(&row))
            ),
            BACK.to_owned(),
        ),
        (AuthorizationStatus::Declined, _) => (
            "Declined".to_owned(),
            "You declined, so nothing was connected or shared.".to_owned(),
            "Return to your MCP client. If you change your mind, call the tool again there for a new link.".to_owned(),
        ),
        (AuthorizationStatus::Failed, _) => {
            let error = row.failure.as_deref().and_then(flow::failure_error);
            return Err(error.map_or_else(attempt_failed, PageError::from));
        }
        (AuthorizationStatus::Exchanging, _) => (
            "Connecting…".to_owned(),
            format!("The broker is finishing this connection with {provider} right now."),
            "Reload this page in a moment, or return to your MCP client: it hears when the connection is ready."
                .to_owned(),
        ),
        (AuthorizationStatus::Pending | AuthorizationStatus::Redirected, _) if row.is_expired(state.core.now()) => {
            return Err(PageError::from(FlowError::Expired));
        }
        (AuthorizationStatus::Pending | AuthorizationStatus::Redirected, _) => (
            "Not finished".to_owned(),
            format!("This request to use {provider} has not been approved or declined yet."),
            format!("Open the link your MCP client gave you (/connect/{id}) to approve or decline it. {START_AGAIN}"),
        ),
    };
    let page = MessagePage { title, message, next_step, sign_out: None, signed_in: Some(SignedIn::of(&session)) };
    Ok(html::render(StatusCode::OK, &page))
}
