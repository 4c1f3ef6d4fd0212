//! The hosted pages' error type: every failure a browser can meet becomes a rendered page with
//! the right status, and internal causes are logged, never shown.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::pages::{self, MessagePage, SignOutForm};
use crate::broker::flow::FlowError;
use crate::identity::browser::SessionError;
use crate::identity::next::login_path;
use crate::identity::oidc::browser_login::SignInError;
use crate::store::StoreError;

#[derive(Debug)]
pub enum PageError {
    /// A page the user can act on: `status` with a title and a sentence (and optionally a
    /// sign-out button). Titles and messages are ours; they never carry secrets.
    Page { status: StatusCode, title: String, message: String, sign_out: Option<SignOutForm> },
    /// 303 to `/login?next=…` (the page needs a signed-in browser).
    SignIn { next: String },
    /// 500 with a generic page; the cause is logged.
    Internal(String),
}

impl PageError {
    pub fn page(status: StatusCode, title: impl Into<String>, message: impl Into<String>) -> Self {
        PageError::Page { status, title: title.into(), message: message.into(), sign_out: None }
    }

    /// 404 "This link is not valid": unknown or malformed ids.
    pub fn not_found() -> Self {
        Self::page(StatusCode::NOT_FOUND, "Link not valid", "This link is not valid.")
    }

    /// 400 for requests no page of ours produces (unparseable form or query).
    pub fn bad_request() -> Self {
        Self::page(
            StatusCode::BAD_REQUEST,
            "Request not valid",
            "This request is not valid. Start again from your client.",
        )
    }

    /// 403 for a form whose CSRF token does not match.
    pub fn csrf() -> Self {
        Self::page(
            StatusCode::FORBIDDEN,
            "Form expired",
            "This form is no longer valid. Reload the page and try again.",
        )
    }

    /// 429 when too many sign-ins are being checked at once.
    pub fn busy() -> Self {
        Self::page(
            StatusCode::TOO_MANY_REQUESTS,
            "Busy",
            "Too many sign-in attempts are being checked right now. Wait a moment and try again.",
        )
    }

    pub fn internal(cause: impl std::fmt::Display) -> Self {
        PageError::Internal(cause.to_string())
    }
}

impl From<StoreError> for PageError {
    fn from(error: StoreError) -> Self {
        PageError::Internal(format!("store: {error}"))
    }
}

impl From<SessionError> for PageError {
    fn from(error: SessionError) -> Self {
        match error {
            SessionError::SignInRequired { next } => PageError::SignIn { next },
            SessionError::Store(error) => Self::from(error),
        }
    }
}

/// The browser-session extractors' rejection, as a page.
impl IntoResponse for SessionError {
    fn into_response(self) -> Response {
        PageError::from(self).into_response()
    }
}

impl From<SignInError> for PageError {
    fn from(error: SignInError) -> Self {
        use StatusCode as S;
        let again = "Start signing in again.";
        match error {
            SignInError::NotValid => Self::page(
                S::BAD_REQUEST,
                "Sign-in not valid",
                format!("This sign-in response is not valid, was already used, or belongs to another browser. {again}"),
            ),
            SignInError::Expired => {
                Self::page(S::GONE, "Sign-in expired", format!("This sign-in took too long. {again}"))
            }
            SignInError::IssuerMismatch => Self::page(
                S::BAD_REQUEST,
                "Sign-in not valid",
                format!("This sign-in response came from an unexpected issuer, so it was ignored. {again}"),
            ),
            SignInError::Refused(code) => Self::page(
                S::FORBIDDEN,
                "Not signed in",
                format!("The identity provider did not sign you in (error: {code}). {again}"),
            ),
            SignInError::IdTokenNotVerified => Self::page(
                S::BAD_REQUEST,
                "Sign-in not valid",
                format!("The identity provider's answer could not be verified, so you are not signed in. {again}"),
            ),
            SignInError::ExchangeFailed(_) => Self::page(
                S::BAD_GATEWAY,
                "Sign-in failed",
                format!("The identity provider did not complete the sign-in. {again}"),
            ),
            SignInError::IssuerUnavailable(_) => Self::page(
                S::SERVICE_UNAVAILABLE,
                "Identity provider unavailable",
                "The identity provider cannot be reached right now. Try again in a moment.",
            ),
            SignInError::Store(error) => Self::from(error),
            SignInError::Internal(cause) => PageError::Internal(cause),
        }
    }
}

impl From<FlowError> for PageError {
    fn from(error: FlowError) -> Self {
        use StatusCode as S;
        let invalid = "This sign-in response is not valid or was already used.";
        match error {
            FlowError::UnknownState | FlowError::AlreadyUsed => {
                Self::page(S::BAD_REQUEST, "Response not valid", invalid)
            }
            FlowError::Interrupted => Self::page(
                S::GONE,
                "Connection interrupted",
                "This connection was interrupted before it finished. Start again from your client.",
            ),
            FlowError::OtherBrowser => Self::page(
                S::BAD_REQUEST,
                "Response not valid",
                "This sign-in response does not belong to this browser's session. Start again from your client, \
                 in the browser where you approve.",
            ),
            FlowError::Expired => {
                Self::page(S::GONE, "Link expired", "This link has expired; ask your client to try again.")
            }
            FlowError::IssuerMismatch => Self::page(
                S::BAD_REQUEST,
                "Response not valid",
                "This sign-in response came from an unexpected issuer, so it was ignored.",
            ),
            FlowError::WrongUser => Self::page(
                S::FORBIDDEN,
                "Wrong account",
                "This link was created for another account. Sign out and sign in as the account that started it.",
            ),
            FlowError::NotActionable => Self::page(
                S::CONFLICT,
                "Link no longer usable",
                "This request can no longer be approved or declined. Return to your client.",
            ),
            FlowError::GrantGone => Self::page(
                S::GONE,
                "Connection removed",
                "That connection was removed meanwhile, so there is nothing to allow. Ask your client to try again.",
            ),
            FlowError::ConnectionChanged => Self::page(
                S::CONFLICT,
                "Connection changed",
                "This connection gained permissions since this page was shown, so nothing was allowed. Ask your client to try again; it will show the current list.",
            ),
            FlowError::UnknownProvider(_) => Self::page(
                S::NOT_FOUND,
                "Provider not available",
                "This provider is no longer available on this broker. Ask your client to try again.",
            ),
            FlowError::ProviderRefused(code) => Self::page(
                S::BAD_REQUEST,
                "Connection refused",
                format!("The provider refused the connection (error: {code}). Return to your client and try again."),
            ),
            FlowError::MissingCode => Self::page(
                S::BAD_REQUEST,
                "Response not valid",
                "The provider's response carried no authorization code. Return to your client and try again.",
            ),
            FlowError::VerifierUnreadable => Self::page(
                S::BAD_REQUEST,
                "Could not finish connecting",
                "This connection attempt can no longer be finished. Nothing was connected: start again from your client (call the tool again), which gives you a new link.",
            ),
            FlowError::ExchangeFailed(reason) => Self::page(
                S::BAD_GATEWAY,
                "Could not connect",
                format!(
                    "The provider did not complete the connection ({reason}). Return to your client and try again."
                ),
            ),
            FlowError::Store(error) => Self::from(error),
            FlowError::Internal(cause) => PageError::Internal(cause),
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        match self {
            PageError::Page { status, title, message, sign_out } => {
                pages::render(status, &MessagePage { title, message, sign_out })
            }
            PageError::SignIn { next } => pages::see_other(&login_path(&next)),
            PageError::Internal(cause) => {
                tracing::error!(%cause, "hosted page failed");
                pages::message(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Something went wrong",
                    "Something went wrong on our side. Try again in a moment.",
                )
            }
        }
    }
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
