//! `GET /admin`: how many of each thing there are (exact up to 10,000, then estimated: see
//! `store::paging`), and what went wrong lately (refresh errors, declined, failed and expired
//! authorizations, provider errors, refused sign-ins).

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::Admin;
use super::listing::Card;
use super::tables::{audit_card, audit_user_ids, user_labels};
use crate::state::AppState;
use crate::store::paging::Count;
use crate::web::error::PageError;
use crate::web::pages::{self, SignedIn};

/// Recent failures shown.
const RECENT: i64 = 10;

#[derive(Template)]
#[template(path = "admin/dashboard.html")]
pub struct DashboardPage {
    pub nav: SignedIn,
    /// (what, how many as shown, where to see them)
    pub counts: Vec<(String, String, String)>,
    pub failures: Vec<Card>,
}

pub async fn show(State(state): State<AppState>, admin: Admin) -> Result<Response, PageError> {
    let c = state.store.admin_counts(state.now()).await?;
    let n = |count: Count| count.shown();
    let counts = vec![
        ("users".into(), n(c.users), "/admin/users".into()),
        ("admins".into(), n(c.admins), "/admin/users?q=admin".into()),
        ("disabled users".into(), n(c.disabled_users), "/admin/users?q=disabled".into()),
        ("grants".into(), n(c.grants), "/admin/grants".into()),
        ("grants needing a new consent".into(), n(c.grants_needing_consent), "/admin/grants?q=needs_reconsent".into()),
        ("open authorizations".into(), n(c.open_authorizations), "/admin/authorizations".into()),
        ("completed authorizations".into(), n(c.completed_authorizations), "/admin/authorizations?q=completed".into()),
        ("declined authorizations".into(), n(c.declined_authorizations), "/admin/authorizations?q=declined".into()),
        ("failed authorizations".into(), n(c.failed_authorizations), "/admin/authorizations?q=failed".into()),
        ("expired authorizations".into(), n(c.expired_authorizations), "/admin/authorizations?q=expired".into()),
        ("consents".into(), n(c.consents), "/admin/consents".into()),
        ("MCP clients".into(), n(c.oauth_clients), "/admin/clients".into()),
        ("tool-server services".into(), n(c.services), "/admin/services".into()),
    ];
    let recent = state.store.audit_failures(RECENT).await?;
    let names = user_labels(&state, audit_user_ids(&recent)).await?;
    let failures = recent.iter().map(|e| audit_card(e, &names)).collect();
    Ok(pages::render(StatusCode::OK, &DashboardPage { nav: SignedIn::of(&admin.0), counts, failures }))
}
