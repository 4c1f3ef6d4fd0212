//! [`Admin`]: the extractor every admin page takes, a browser signed in as an admin.

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;

use crate::html::PageError;
use crate::identity::browser::BrowserSession;
use crate::state::AppState;
use crate::store::audit::Actor;

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
