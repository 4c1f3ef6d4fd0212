//! [`PageError`]: every failure a browser can meet on any face's pages becomes a rendered message
//! page with the right status, and internal causes are logged, never shown. What the hosted pages
//! say for the connect flow's and the sign-in's own refusals is theirs (`crate::web`).

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::message::{MessagePage, SignOutForm, render_message};
use super::render::see_other;
use crate::error_chain::{BoxError, Chain};
use crate::identity::browser::BrowserSessionError;
use crate::identity::next::login_path;
use crate::store::StoreError;

/// What a person does next after most failures in the connect flow: the MCP client made the
/// link, so only it can make a new one.
pub const START_AGAIN: &str = "Start again from your MCP client: call the tool again, and it gives you a new link.";

#[derive(Debug)]
pub enum PageError {
    /// A page the user can act on: `status`, a title, what happened in plain words, and what to
    /// do now (and optionally a sign-out button). Every message page also links home. Titles
    /// and messages are ours; they never carry secrets.
    Page { status: StatusCode, title: String, message: String, next_step: String, sign_out: Option<SignOutForm> },
    /// 303 to `/login?next=…` (the page needs a signed-in browser).
    SignIn { next: String },
    /// 500 with a generic page; the cause is logged (with its own causes). A database that is
    /// unavailable (`store::unavailable`) makes it a 503 saying to try again shortly.
    Internal(BoxError),
}

impl PageError {
    /// A page saying what happened (`message`) and what to do now (`next_step`).
    pub fn page(
        status: StatusCode,
        title: impl Into<String>,
        message: impl Into<String>,
        next_step: impl Into<String>,
    ) -> Self {
        PageError::Page {
            status,
            title: title.into(),
            message: message.into(),
            next_step: next_step.into(),
            sign_out: None,
        }
    }

    /// 404 "This link is not valid": unknown or malformed ids, and rows of another account
    /// where saying more would tell that account something.
    pub fn not_found() -> Self {
        Self::page(
            StatusCode::NOT_FOUND,
            "Link not valid",
            "This link does not lead anywhere: it may be mistyped, cut short, or meant for another account.",
            "Open the link exactly as your MCP client gave it, or start again from your MCP client to get a new one.",
        )
    }

    /// 400 for requests no page of ours produces (unparseable form or query).
    pub fn bad_request() -> Self {
        Self::page(
            StatusCode::BAD_REQUEST,
            "Request not valid",
            "This request is not one the broker's pages send, so nothing was done.",
            START_AGAIN,
        )
    }

    /// 403 for a form whose CSRF token does not match.
    pub fn csrf() -> Self {
        Self::page(
            StatusCode::FORBIDDEN,
            "Form expired",
            "This form was shown before you last signed in or out, so it was not accepted and nothing changed.",
            "Go back, reload the page, and try again.",
        )
    }

    /// 429 when too many sign-ins are being checked at once.
    pub fn busy() -> Self {
        Self::page(
            StatusCode::TOO_MANY_REQUESTS,
            "Busy",
            "Too many sign-in attempts are being checked right now, so yours was not checked.",
            "Wait a moment and sign in again.",
        )
    }

    /// 503 while the database is briefly unavailable (`Internal` with such a cause becomes it,
    /// with a Retry-After header).
    pub fn database_away() -> Self {
        Self::page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Temporarily unavailable",
            "The broker cannot reach its database just now; what you asked for may not have happened.",
            format!(
                "Try again in {} seconds. If it keeps happening, tell the broker's operator.",
                crate::store::unavailable::RETRY_AFTER_SECONDS
            ),
        )
    }

    /// The 500 page for a failure on our side whose cause is logged elsewhere.
    pub fn went_wrong() -> Self {
        Self::page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Something went wrong",
            "Something went wrong on our side; what you asked for may not have happened.",
            "Try again in a moment. If it keeps happening, tell the broker's operator.",
        )
    }

    /// A failure on our side: a message (when it is the whole cause) or the error itself.
    pub fn internal(cause: impl Into<BoxError>) -> Self {
        PageError::Internal(cause.into())
    }
}

impl From<StoreError> for PageError {
    fn from(error: StoreError) -> Self {
        PageError::Internal(Box::new(error))
    }
}

impl From<BrowserSessionError> for PageError {
    fn from(error: BrowserSessionError) -> Self {
        match error {
            BrowserSessionError::SignInRequired { next } => PageError::SignIn { next },
            BrowserSessionError::Store(error) => Self::from(error),
        }
    }
}

/// The browser-session extractors' rejection, as a page.
impl IntoResponse for BrowserSessionError {
    fn into_response(self) -> Response {
        PageError::from(self).into_response()
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        match self {
            PageError::Page { status, title, message, next_step, sign_out } => {
                let page = MessagePage { title, message, next_step, sign_out, signed_in: None };
                render_message(status, page)
            }
            PageError::SignIn { next } => see_other(&login_path(&next)),
            // The database away (restarting, failing over, overloaded) passes without anyone
            // acting: the visitor is told to try again shortly, with the delay in Retry-After,
            // and the operator's log says warn, not error, as for the token API's 503.
            PageError::Internal(cause) if crate::store::unavailable::is_unavailable(&*cause) => {
                tracing::warn!(cause = %Chain(&*cause), "hosted page answered 503: the database is unavailable");
                let mut response = PageError::database_away().into_response();
                response.headers_mut().insert(
                    header::RETRY_AFTER,
                    axum::http::HeaderValue::from(crate::store::unavailable::RETRY_AFTER_SECONDS),
                );
                response
            }
            PageError::Internal(cause) => {
                tracing::error!(cause = %Chain(&*cause), "hosted page failed");
                PageError::went_wrong().into_response()
            }
        }
    }
}

/// The page for a path no route serves (`/admin/` with its slash included): what happened and
/// what to do; [`super::top_bar::top_bar_on_error_pages`] adds the top bar when signed in.
pub async fn unknown_path() -> Response {
    let page = MessagePage {
        title: "Page not found".into(),
        message: "There is no page at this address: it may be mistyped or cut short, or the page has moved.".into(),
        next_step: "Check the address, or start from the home page.".into(),
        sign_out: None,
        signed_in: None,
    };
    render_message(StatusCode::NOT_FOUND, page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn internal_errors_do_not_show_their_cause() {
        let response = PageError::internal("secret detail").into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        assert!(!String::from_utf8_lossy(&body).contains("secret detail"));
    }

    #[test]
    fn sign_in_redirects_to_the_login_form_with_next() {
        let response = PageError::SignIn { next: "/connect/abc".into() }.into_response();
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        assert_eq!(response.headers()["location"], "/login?next=/connect/abc");
    }
}
