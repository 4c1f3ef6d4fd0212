//! The (client, server) approvals on `/connections` (issue 26, item 5): which client may call
//! which server behind the broker, each with a Withdraw button. Withdrawing takes effect at the
//! client's next call, which asks again. The form carries the session's CSRF token, and the
//! pair posted back is deleted among this user's own rows only.

use axum::Form;
use axum::extract::State;
use axum::extract::rejection::FormRejection;
use axum::http::StatusCode;
use axum::response::Response;

use super::connections::{BACK, PostedForm, checked};
use super::error::PageError;
use super::pages::{self, ServerApprovalRow};
use crate::broker::{consent, gateway_consent};
use crate::display::safe_text;
use crate::identity::ClientIdentity;
use crate::identity::browser::OptionalBrowserSession;
use crate::state::AppState;

/// The user's approvals, by server then client, each client named as every page names it.
pub async fn rows(state: &AppState, user_id: &str) -> Result<Vec<ServerApprovalRow>, PageError> {
    let approvals = state.store.gateway_consents_for_user(user_id).await?;
    let names = consent::client_names(state, approvals.iter().map(|a| a.client_key.as_str())).await;
    Ok(approvals
        .into_iter()
        .map(|a| ServerApprovalRow {
            client: names.get(&a.client_key).cloned().unwrap_or_else(|| ClientIdentity::from_key(&a.client_key).name()),
            server: safe_text(&a.server_name),
            since: super::connections::day(a.created_at),
            server_id: a.server_id,
            client_key: a.client_key,
        })
        .collect())
}

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
    if !gateway_consent::withdraw(&state, &session.user.id, &form.client_key, &form.server_id).await? {
        return Err(PageError::page(
            StatusCode::NOT_FOUND,
            "Not found",
            "That client had no approval for that server to withdraw, so nothing changed.",
            BACK,
        ));
    }
    tracing::info!(user_id = %session.user.id, "a client's approval for a server behind the broker was withdrawn");
    Ok(pages::see_other("/connections"))
}
