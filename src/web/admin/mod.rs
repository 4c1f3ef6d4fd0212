//! The operators' pages under `/admin`, for users marked admin
//! (`oauth-broker admin users add NAME --admin`, `admin users set-admin NAME true`).
//!
//! | route | file | what |
//! |---|---|---|
//! | `GET /admin[?range=24h\|7d]` | [`dashboard`] | counts, charts ([`charts`]) and recent failures |
//! | `GET /admin/{users,grants,authorizations,consents,clients,services,audit}` | [`tables`] | searchable (`q`), paginated (`page`) lists; never a token |
//! | `GET /admin/providers`, `/admin/users/{id}`, `/admin/services/{id}` | [`views`] | provider health; one user's or service's own page |
//! | `GET /admin/webhooks`, `POST /admin/webhooks/resend` | [`webhooks`], [`actions`] | recent deliveries and dead letters per service, re-send |
//! | `GET /admin/servers` | [`servers`] | the MCP servers behind the broker (gateway mode), read only |
//! | `POST /admin/grants/revoke`, `/admin/consents/withdraw`, `/admin/authorizations/expire`, `/admin/users/disable` | [`actions`] | CSRF-checked, audited with the admin as actor |
//!
//! Every handler takes an [`Admin`] ([`signed_in_admin`]): a signed-out browser is sent to sign
//! in, a signed-in non-admin gets 403, checked at every request (so `set-admin NAME false` acts
//! at once).
//! Every list is a [`listing::TablePage`] (search, keyset paging) with its [`filters`]; the
//! admin sections' links are [`sections`]'.
//! Data comes from the store and the broker core; these modules only translate it to pages.

pub mod actions;
pub mod charts;
pub mod dashboard;
pub mod filters;
pub mod listing;
pub mod orgs;
pub mod sections;
pub mod servers;
mod signed_in_admin;
pub mod tables;
pub mod views;
pub mod webhooks;

pub use signed_in_admin::Admin;

use axum::Router;
use axum::routing::{get, post};

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/admin", get(dashboard::show))
        .route("/admin/orgs", get(orgs::list))
        .route("/admin/orgs/{slug}", get(orgs::members))
        .route("/admin/users", get(tables::users))
        .route("/admin/users/{id}", get(views::user))
        .route("/admin/providers", get(views::providers))
        .route("/admin/services/{id}", get(views::service))
        .route("/admin/grants", get(tables::grants))
        .route("/admin/authorizations", get(tables::authorizations))
        .route("/admin/consents", get(tables::consents))
        .route("/admin/clients", get(tables::clients))
        .route("/admin/services", get(tables::services))
        .route("/admin/servers", get(servers::servers))
        .route("/admin/servers/{id}", get(servers::server))
        .route("/admin/audit", get(tables::audit))
        .route("/admin/webhooks", get(webhooks::list))
        .route("/admin/webhooks/resend", post(actions::resend_webhook))
        .route("/admin/grants/revoke", post(actions::revoke_grant))
        .route("/admin/consents/withdraw", post(actions::withdraw_consent))
        .route("/admin/authorizations/expire", post(actions::expire_authorization))
        .route("/admin/users/disable", post(actions::disable_user))
}
