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
//! Every handler takes an [`Admin`]: a signed-out browser is sent to sign in, a signed-in
//! non-admin gets 403, checked at every request (so `set-admin NAME false` acts at once).
//! Data comes from the store and the broker core; these modules only translate it to pages.

pub mod actions;
pub mod charts;
pub mod dashboard;
pub mod filters;
pub mod listing;
pub mod sections;
pub mod servers;
pub mod tables;
pub mod views;
pub mod webhooks;

use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::routing::{get, post};

use crate::html::PageError;
use crate::identity::browser::BrowserSession;
use crate::state::AppState;
use crate::store::audit::Actor;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/admin", get(dashboard::show))
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

/// A signed-in admin.
pub struct Admin(pub BrowserSession);

impl FromRequestParts<AppState> for Admin {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let session = BrowserSession::from_request_parts(parts, state).await?;
        if !session.user.is_admin() {
            tracing::info!(user_id = %session.user.id, path = %parts.uri.path(), "admin page refused: not an admin");
            return Err(PageError::page(
                StatusCode::FORBIDDEN,
                "Admins only",
                "This page is for the broker's admins, and your account is not one, so nothing is shown or changed.",
                "Go back home. If you need it, ask an admin to run `oauth-broker admin users set-admin NAME true` for you.",
            ));
        }
        Ok(Admin(session))
    }
}

impl Admin {
    /// How the audit log names the acting admin (its `actor` column).
    pub fn actor(&self) -> Actor<'_> {
        Actor::Admin(&self.0.user.id)
    }
}
