//! Withdrawing a (client, server) approval listed on `/connections` (the
//! list itself is built in `super::connections`). Withdrawing takes effect at the
//! client's next call, which asks again. The form carries the session's CSRF token, and the
//! pair posted back is deleted among this user's own rows only.

use axum::Form;
use axum::extract::State;
use axum::extract::rejection::FormRejection;
use axum::http::StatusCode;
use axum::response::Response;

use super::connections::{BACK, PostedForm, checked};
use crate::broker::gateway_consent;
use crate::html::{self, PageError};
use crate::identity::browser::OptionalBrowserSession;
use crate::state::AppState;

#[derive(serde::Deserialize)]
pub struct WithdrawForm {
    csrf_token: String,
    server_id: String,
    client_key: String,
}

impl PostedForm for WithdrawForm {
    fn csrf_token(&self) -> &str {
        &self.csrf_token
    }
}

/// `POST /connections/servers/withdraw`: withdraws one client's approval for one server.
pub async fn withdraw(
    State(state): State<AppState>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    form: Result<Form<WithdrawForm>, FormRejection>,
) -> Result<Response, PageError> {
    let (session, form) = checked(session, form)?;
    // Scoped to this user in the query itself: another user's pair deletes nothing.
    if !gateway_consent::withdraw(&state.core, &session.user.id, &form.client_key, &form.server_id).await? {
        return Err(PageError::page(
            StatusCode::NOT_FOUND,
            "Not found",
            "That client had no approval for that server to withdraw, so nothing changed.",
            BACK,
        ));
    }
    tracing::info!(user_id = %session.user.id, "a client's approval for a server behind the broker was withdrawn");
    Ok(html::see_other("/connections"))
}
