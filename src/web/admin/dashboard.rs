//! `GET /admin`: how many of each thing there are, and what went wrong lately (refresh errors,
//! declined, failed and expired authorizations, provider errors, refused sign-ins).

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::Admin;
use super::listing::Card;
use super::tables::{MAX_ROWS, audit_card, shown_status, user_labels};
use crate::state::AppState;
use crate::store::grants::GrantStatus;
use crate::web::error::PageError;
use crate::web::pages::{self, SignedIn};

/// Recent failures shown.
const RECENT: i64 = 10;

#[derive(Template)]
#[template(path = "admin/dashboard.html")]
pub struct DashboardPage {
    pub nav: SignedIn,
    /// (what, how many, where to see them)
    pub counts: Vec<(String, usize, String)>,
    pub failures: Vec<Card>,
}

pub async fn show(State(state): State<AppState>, admin: Admin) -> Result<Response, PageError> {
    let users = state.store.list_users().await?;
    let grants = state.store.all_grants().await?;
    let authorizations = state.store.all_authorizations(MAX_ROWS).await?;
    let now = state.now();
    let by_status = |wanted: &[&str]| authorizations.iter().filter(|a| wanted.contains(&shown_status(a, now))).count();
    let counts = vec![
        ("users".into(), users.len(), "/admin/users".into()),
        ("admins".into(), users.iter().filter(|u| u.is_admin()).count(), "/admin/users?q=admin".into()),
        ("disabled users".into(), users.iter().filter(|u| u.is_disabled()).count(), "/admin/users?q=disabled".into()),
        ("grants".into(), grants.len(), "/admin/grants".into()),
        (
            "grants needing a new consent".into(),
            grants.iter().filter(|g| g.status == GrantStatus::NeedsReconsent).count(),
            "/admin/grants?q=needs_reconsent".into(),
        ),
        (
            "open authorizations".into(),
            by_status(&["pending", "redirected", "exchanging"]),
            "/admin/authorizations".into(),
        ),
        ("completed authorizations".into(), by_status(&["completed"]), "/admin/authorizations?q=completed".into()),
        ("declined authorizations".into(), by_status(&["declined"]), "/admin/authorizations?q=declined".into()),
        ("failed authorizations".into(), by_status(&["failed"]), "/admin/authorizations?q=failed".into()),
        ("expired authorizations".into(), by_status(&["expired"]), "/admin/authorizations?q=expired".into()),
        ("consents".into(), state.store.all_consents(MAX_ROWS).await?.len(), "/admin/consents".into()),
        ("MCP clients".into(), state.store.list_oauth_clients(MAX_ROWS).await?.len(), "/admin/clients".into()),
        ("tool-server services".into(), state.store.list_services().await?.len(), "/admin/services".into()),
    ];
    let names = user_labels(&state).await?;
    let failures = state.store.audit_failures(RECENT).await?.iter().map(|e| audit_card(e, &names)).collect();
    Ok(pages::render(StatusCode::OK, &DashboardPage { nav: SignedIn::of(&admin.0), counts, failures }))
}
