//! `GET /admin[?range=24h|7d]`: how many of each thing there are (exact up to 10,000, then
//! estimated: see `store::paging`; MCP sessions open on this instance, from its own session
//! table, [`OpenMcpSessions`]), charts of the last 24 hours or 7 days (authorizations by
//! outcome, refresh failures by provider and kind, token-API answers by service, sign-ins; from
//! the hourly counts of migration 0028, drawn by [`super::charts`]), and what went wrong lately
//! (refresh errors, declined, failed and expired authorizations, provider errors, refused
//! sign-ins).

use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::charts::{self, Chart, Range};
use super::listing::Rows;
use super::signed_in_admin::Admin;
use super::tables::{audit_card, audit_user_ids, user_labels};
use crate::html::{self, PageError, SignedIn};
use crate::state::AppState;
use crate::store::counts::Count;

/// Recent failures shown.
const RECENT: i64 = 10;

#[derive(Template)]
#[template(path = "admin/dashboard.html")]
pub struct DashboardPage {
    pub nav: SignedIn,
    pub admin_nav: Vec<super::sections::NavLink>,
    /// (what, how many as shown, where to see them)
    pub counts: Vec<(String, String, String)>,
    /// (code, words) of each range offered, and the one shown.
    pub ranges: Vec<(&'static str, &'static str)>,
    pub range_code: &'static str,
    pub range_words: &'static str,
    pub charts: Vec<Chart>,
    pub width: u32,
    pub height: u32,
    pub plot_left: u32,
    pub plot_right: u32,
    pub tick_y: u32,
    /// The recent failures.
    pub table: Rows,
}

/// How many MCP sessions this process holds open (parked ones too: the client still holds
/// them). The MCP face keeps its sessions in memory, out of the pages' reach; `app.rs` hands
/// this count to the pages as a request extension. Reading it is one lock of the session map,
/// never a query. No instance records its sessions in the database, so on PostgreSQL with
/// several instances each dashboard counts its own (and says so).
#[derive(Clone)]
pub struct OpenMcpSessions(Arc<dyn Fn() -> usize + Send + Sync>);

impl OpenMcpSessions {
    pub fn new(count: impl Fn() -> usize + Send + Sync + 'static) -> Self {
        OpenMcpSessions(Arc::new(count))
    }

    pub fn now(&self) -> usize {
        (self.0)()
    }
}

#[derive(Debug, Default, serde::Deserialize)]
pub struct RangeQuery {
    #[serde(default)]
    range: Option<String>,
}

pub async fn show(
    State(state): State<AppState>,
    Extension(mcp_sessions): Extension<OpenMcpSessions>,
    admin: Admin,
    query: Result<Query<RangeQuery>, QueryRejection>,
) -> Result<Response, PageError> {
    let range = query.ok().and_then(|Query(q)| Range::parse(q.range.as_deref())).ok_or_else(|| {
        PageError::page(
            StatusCode::BAD_REQUEST,
            "Not a valid request",
            "The dashboard shows the last 24 hours (range=24h) or the last 7 days (range=7d).",
            "Go back to the dashboard and pick one of its ranges; nothing was changed.",
        )
    })?;
    let now = state.core.now();
    let c = state.core.store.console().admin_counts(now).await?;
    let sessions = state.core.store.browser_sessions().count_live(now).await?;
    let mcp_sessions = i64::try_from(mcp_sessions.now()).unwrap_or(i64::MAX);
    let n = |count: Count| count.shown();
    let counts = vec![
        ("users".into(), n(c.users), "/admin/users".into()),
        ("admins".into(), n(c.admins), "/admin/users?q=admin".into()),
        ("disabled users".into(), n(c.disabled_users), "/admin/users?q=disabled".into()),
        ("active browser sessions".into(), n(sessions), "/admin/users".into()),
        ("MCP sessions open on this instance".into(), n(Count::Exact(mcp_sessions)), "/admin/clients".into()),
        ("grants".into(), n(c.grants), "/admin/grants".into()),
        ("grants needing a new consent".into(), n(c.grants_needing_consent), "/admin/grants?q=needs_reconsent".into()),
        ("open authorizations".into(), n(c.open_authorizations), "/admin/authorizations".into()),
        (
            "completed authorizations".into(),
            n(c.completed_authorizations),
            "/admin/authorizations?status=completed".into(),
        ),
        (
            "declined authorizations".into(),
            n(c.declined_authorizations),
            "/admin/authorizations?status=declined".into(),
        ),
        ("failed authorizations".into(), n(c.failed_authorizations), "/admin/authorizations?status=failed".into()),
        ("expired authorizations".into(), n(c.expired_authorizations), "/admin/authorizations?q=expired".into()),
        ("consents".into(), n(c.consents), "/admin/consents".into()),
        ("MCP clients".into(), n(c.oauth_clients), "/admin/clients".into()),
        ("tool-server services".into(), n(c.services), "/admin/services".into()),
    ];
    let window = range.window(now);
    let hourly = state.core.store.console().hourly_counts(window.start).await?;
    let charts = vec![
        charts::stacked(
            "authorizations",
            "Authorizations by outcome".into(),
            &hourly,
            "authorizations",
            window,
            |c| c.label.clone(),
            "No authorization ended in this time.",
        ),
        charts::stacked(
            "refresh-failures",
            "Refresh failures by provider and kind".into(),
            &hourly,
            "refresh_failures",
            window,
            |c| format!("{} · {}", c.label, c.sub),
            "No refresh failed in this time.",
        ),
        charts::stacked(
            "token-api",
            "Token-API answers by service".into(),
            &hourly,
            "token_api",
            window,
            |c| if c.sub == "success" { c.label.clone() } else { format!("{} · {}", c.label, c.sub) },
            "No service asked in this time.",
        ),
        charts::stacked(
            "sign-ins",
            format!("Browser sign-ins ({} sessions active now)", sessions.shown()),
            &hourly,
            "sign_ins",
            window,
            |_| "sign-ins".into(),
            "Nobody signed in in this time.",
        ),
    ];
    let recent = state.core.store.audit().failures(RECENT).await?;
    let names = user_labels(&state, audit_user_ids(&recent)).await?;
    let failures = recent.iter().map(|e| audit_card(e, &names)).collect();
    let page = DashboardPage {
        nav: SignedIn::of(&admin.0),
        admin_nav: super::sections::links("/admin"),
        counts,
        ranges: [Range::Day, Range::Week].iter().map(|r| (r.code(), r.words())).collect(),
        range_code: range.code(),
        range_words: range.words(),
        charts,
        width: charts::WIDTH,
        height: charts::HEIGHT,
        plot_left: charts::PLOT_LEFT,
        plot_right: charts::PLOT_RIGHT,
        tick_y: charts::TICK_Y,
        table: Rows::new("failures", "action", failures),
    };
    Ok(html::render(StatusCode::OK, &page))
}
