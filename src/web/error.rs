//! The hosted pages' error type: every failure a browser can meet becomes a rendered page with
//! the right status, and internal causes are logged, never shown.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::pages::{self, MessagePage, ShownMessage, SignOutForm, SignedIn};
use crate::broker::flow::FlowError;
use crate::error_chain::{BoxError, Chain};
use crate::identity::browser::{self, BrowserSessionError};
use crate::identity::next::login_path;
use crate::identity::oidc::browser_login::SignInError;
use crate::state::AppState;
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

impl From<SignInError> for PageError {
    fn from(error: SignInError) -> Self {
        use StatusCode as S;
        let again = "Sign in again from the home page (or open your link again); you will be sent to the identity provider afresh.";
        match error {
            SignInError::NotValid => Self::page(
                S::BAD_REQUEST,
                "Sign-in not valid",
                "This sign-in response is not valid, was already used, or belongs to another browser, so you are not signed in.",
                again,
            ),
            SignInError::Expired => Self::page(
                S::GONE,
                "Sign-in expired",
                "This sign-in took too long, so it was not accepted and you are not signed in.",
                again,
            ),
            SignInError::IssuerMismatch => Self::page(
                S::BAD_REQUEST,
                "Sign-in not valid",
                "This sign-in response came from an unexpected issuer, so it was ignored and you are not signed in.",
                again,
            ),
            SignInError::Refused(code) => Self::page(
                S::FORBIDDEN,
                "Not signed in",
                format!("The identity provider did not sign you in (error: {code})."),
                again,
            ),
            SignInError::IdTokenNotVerified => Self::page(
                S::BAD_REQUEST,
                "Sign-in not valid",
                "The identity provider's answer could not be verified, so you are not signed in.",
                again,
            ),
            SignInError::ExchangeFailed(_) => Self::page(
                S::BAD_GATEWAY,
                "Sign-in failed",
                "The identity provider did not complete the sign-in, so you are not signed in.",
                again,
            ),
            SignInError::IssuerUnavailable(_) => Self::page(
                S::SERVICE_UNAVAILABLE,
                "Identity provider unavailable",
                "The identity provider cannot be reached right now, so you could not be signed in.",
                "Wait a moment, then sign in again from the home page.",
            ),
            SignInError::Disabled => Self::page(
                S::FORBIDDEN,
                "Account disabled",
                "The identity provider signed you in, but this account is disabled on the broker, so you are not signed in.",
                "Ask the broker's operator to enable your account.",
            ),
            SignInError::Store(error) => Self::from(error),
            SignInError::Internal(cause) => PageError::Internal(cause),
        }
    }
}

impl From<FlowError> for PageError {
    fn from(error: FlowError) -> Self {
        use StatusCode as S;
        let nothing = "Nothing was connected.";
        match error {
            FlowError::UnknownState | FlowError::AlreadyUsed => Self::page(
                S::BAD_REQUEST,
                "Response not valid",
                format!(
                    "The provider's answer does not match a connection waiting here: it is not valid or was already used. {nothing}"
                ),
                format!("If you already finished connecting, return to your MCP client. Otherwise: {START_AGAIN}"),
            ),
            FlowError::Interrupted => Self::page(
                S::GONE,
                "Connection interrupted",
                format!(
                    "This connection was interrupted before it finished (the broker stopped while talking to the provider). {nothing}"
                ),
                START_AGAIN,
            ),
            FlowError::OtherBrowser => Self::page(
                S::BAD_REQUEST,
                "Response not valid",
                format!(
                    "The provider's answer reached a browser (or a sign-in) other than the one where you approved. {nothing}"
                ),
                "Start again from your MCP client, and open its link in the browser where you approve.",
            ),
            FlowError::Expired => Self::page(
                S::GONE,
                "Link expired",
                format!("This connect link is too old to use. {nothing}"),
                START_AGAIN,
            ),
            FlowError::IssuerMismatch => Self::page(
                S::BAD_REQUEST,
                "Response not valid",
                format!("The answer came from an unexpected issuer, so it was ignored. {nothing}"),
                START_AGAIN,
            ),
            FlowError::WrongCallback => Self::page(
                S::BAD_REQUEST,
                "Response not valid",
                format!(
                    "The answer arrived at another provider's return address than the one this connection was sent with, so it was ignored. {nothing}"
                ),
                START_AGAIN,
            ),
            FlowError::WrongUser => Self::page(
                S::FORBIDDEN,
                "Wrong account",
                "This link was created for another account than the one signed in here.",
                "Sign out, then sign in as the account that started it.",
            ),
            FlowError::NotActionable => Self::page(
                S::CONFLICT,
                "Link no longer usable",
                "This request was already approved, declined or ended, so it can no longer be approved or declined.",
                "Return to your MCP client; if it still needs access, it gives you a new link.",
            ),
            FlowError::GrantGone => Self::page(
                S::GONE,
                "Connection removed",
                "That connection was removed meanwhile, so there is nothing to allow.",
                START_AGAIN,
            ),
            FlowError::ServerGone => Self::page(
                S::GONE,
                "Server removed",
                "That server was removed from the broker meanwhile, so there is nothing to allow.",
                START_AGAIN,
            ),
            FlowError::ConnectionChanged => Self::page(
                S::CONFLICT,
                "Connection changed",
                "This connection gained permissions since this page was shown, so nothing was allowed.",
                "Start again from your MCP client; the new link shows the current list of permissions.",
            ),
            FlowError::UnknownProvider(_) => Self::page(
                S::NOT_FOUND,
                "Provider not available",
                format!("This provider is no longer available on this broker. {nothing}"),
                "Ask the broker's operator about this provider, or start again from your MCP client.",
            ),
            FlowError::ProviderRefused(code) if code == "access_denied" => Self::page(
                S::BAD_REQUEST,
                "Not connected",
                format!(
                    "The provider says access was denied (error: access_denied): you chose Deny there, or it refused. {nothing}"
                ),
                format!("If you meant to connect: {START_AGAIN}"),
            ),
            FlowError::ProviderRefused(code) => Self::page(
                S::BAD_REQUEST,
                "Connection refused",
                format!("The provider refused the connection (error: {code}). {nothing}"),
                START_AGAIN,
            ),
            FlowError::MissingCode => Self::page(
                S::BAD_REQUEST,
                "Response not valid",
                format!("The provider's answer carried no authorization code. {nothing}"),
                START_AGAIN,
            ),
            FlowError::VerifierUnreadable => Self::page(
                S::BAD_REQUEST,
                "Could not finish connecting",
                format!("This connection attempt can no longer be finished. {nothing}"),
                START_AGAIN,
            ),
            FlowError::ExchangeFailed(reason) => Self::page(
                S::BAD_GATEWAY,
                "Could not connect",
                format!("The provider did not complete the connection ({reason}). {nothing}"),
                START_AGAIN,
            ),
            FlowError::Store(error) => Self::from(error),
            FlowError::Internal(cause) => PageError::Internal(cause),
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        match self {
            PageError::Page { status, title, message, next_step, sign_out } => {
                let page = MessagePage { title, message, next_step, sign_out, signed_in: None };
                pages::render_message(status, page)
            }
            PageError::SignIn { next } => pages::see_other(&login_path(&next)),
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

/// Error pages keep the signed-in top bar (home, My connections, Sign out): a handler that
/// fails often has no session at hand (or failed before reading it), so the page it returned is
/// rendered again here, with the bar, when the request's cookie names a live session. Only
/// message pages are looked at; every other response passes untouched.
pub async fn top_bar_on_error_pages(State(state): State<AppState>, request: Request, next: Next) -> Response {
    // Only the cookie matters; a request without one (an API or MCP client) copies nothing.
    let mut cookies = HeaderMap::new();
    for value in request.headers().get_all(header::COOKIE) {
        cookies.append(header::COOKIE, value.clone());
    }
    let response = next.run(request).await;
    if cookies.is_empty() {
        return response;
    }
    let Some(ShownMessage(page)) = response.extensions().get::<ShownMessage>().cloned() else { return response };
    if page.signed_in.is_some() {
        return response;
    }
    let session = match browser::current(&state.identity, &cookies).await {
        Ok(Some(session)) => session,
        Ok(None) => return response,
        Err(error) => {
            tracing::warn!(%error, "could not read the browser session for an error page's top bar");
            return response;
        }
    };
    let page = MessagePage { signed_in: Some(SignedIn::of(&session)), ..(*page).clone() };
    let (parts, _) = response.into_parts();
    Response::from_parts(parts, pages::render(StatusCode::OK, &page).into_body())
}

/// The page for a path no route serves (`/admin/` with its slash included): what happened and
/// what to do; [`top_bar_on_error_pages`] adds the top bar when signed in.
pub async fn unknown_path() -> Response {
    let page = MessagePage {
        title: "Page not found".into(),
        message: "There is no page at this address: it may be mistyped or cut short, or the page has moved.".into(),
        next_step: "Check the address, or start from the home page.".into(),
        sign_out: None,
        signed_in: None,
    };
    pages::render_message(StatusCode::NOT_FOUND, page)
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

    /// The log gets the whole chain (also as JSON, which writes only an error's own message);
    /// the page gets none of it.
    #[tokio::test]
    async fn an_internal_error_is_logged_with_its_causes_and_shown_without_them() {
        let cause = url::Url::parse("not a url").unwrap_err();
        let error = FlowError::Internal(crate::error_chain::because("the stored redirect_uri is not a URL", cause));
        let (response, logs) = crate::telemetry::captured::json_logs(|| PageError::from(error).into_response());
        assert!(logs.contains("the stored redirect_uri is not a URL: relative URL without a base"), "{logs}");
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        let html = String::from_utf8_lossy(&body);
        assert!(!html.contains("redirect_uri") && !html.contains("relative URL"), "{html}");
    }

    /// Every flow error the pages can show. The match has no wildcard, so a new variant does
    /// not compile until it is listed here (and so checked below).
    fn every_flow_error() -> Vec<FlowError> {
        let all = vec![
            FlowError::UnknownState,
            FlowError::OtherBrowser,
            FlowError::Expired,
            FlowError::IssuerMismatch,
            FlowError::AlreadyUsed,
            FlowError::Interrupted,
            FlowError::WrongUser,
            FlowError::NotActionable,
            FlowError::UnknownProvider("gone".into()),
            FlowError::WrongCallback,
            FlowError::GrantGone,
            FlowError::ServerGone,
            FlowError::ConnectionChanged,
            FlowError::ProviderRefused("access_denied".into()),
            FlowError::ProviderRefused("server_error".into()),
            FlowError::MissingCode,
            FlowError::VerifierUnreadable,
            FlowError::ExchangeFailed("invalid_grant".into()),
            FlowError::Store(StoreError::Conflict),
            FlowError::Internal("x".into()),
        ];
        for error in &all {
            match error {
                FlowError::UnknownState
                | FlowError::OtherBrowser
                | FlowError::Expired
                | FlowError::IssuerMismatch
                | FlowError::WrongCallback
                | FlowError::AlreadyUsed
                | FlowError::Interrupted
                | FlowError::WrongUser
                | FlowError::NotActionable
                | FlowError::UnknownProvider(_)
                | FlowError::GrantGone
                | FlowError::ServerGone
                | FlowError::ConnectionChanged
                | FlowError::ProviderRefused(_)
                | FlowError::MissingCode
                | FlowError::VerifierUnreadable
                | FlowError::ExchangeFailed(_)
                | FlowError::Store(_)
                | FlowError::Internal(_) => {}
            }
        }
        all
    }

    /// Every sign-in error, listed the same way.
    fn every_sign_in_error() -> Vec<SignInError> {
        use crate::identity::oidc::OidcError;
        let all = vec![
            SignInError::NotValid,
            SignInError::Expired,
            SignInError::IssuerMismatch,
            SignInError::Refused("access_denied".into()),
            SignInError::IdTokenNotVerified,
            SignInError::ExchangeFailed("x".into()),
            SignInError::IssuerUnavailable(OidcError::Unavailable("down".into())),
            SignInError::Disabled,
            SignInError::Store(StoreError::Conflict),
            SignInError::Internal("x".into()),
        ];
        for error in &all {
            match error {
                SignInError::NotValid
                | SignInError::Expired
                | SignInError::IssuerMismatch
                | SignInError::Refused(_)
                | SignInError::IdTokenNotVerified
                | SignInError::ExchangeFailed(_)
                | SignInError::IssuerUnavailable(_)
                | SignInError::Disabled
                | SignInError::Store(_)
                | SignInError::Internal(_) => {}
            }
        }
        all
    }

    #[tokio::test]
    async fn every_error_page_says_what_happened_what_to_do_and_links_home() {
        let pages = every_flow_error()
            .into_iter()
            .map(PageError::from)
            .chain(every_sign_in_error().into_iter().map(PageError::from))
            .chain([
                PageError::not_found(),
                PageError::bad_request(),
                PageError::csrf(),
                PageError::busy(),
                PageError::database_away(),
                PageError::went_wrong(),
                PageError::internal("cause"),
            ]);
        for page in pages {
            let shown = format!("{page:?}");
            if let PageError::Page { title, message, next_step, .. } = &page {
                // The message says more than the title, and the next step is its own sentence.
                assert!(message.len() > title.len() + 10, "{shown}");
                assert!(next_step.len() > 15 && !message.contains(next_step.as_str()), "{shown}");
            }
            let response = page.into_response();
            let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
            let html = String::from_utf8_lossy(&body);
            assert!(html.contains("What to do now:"), "{shown}: {html}");
            assert!(html.contains("href=\"/\""), "a link home: {shown}");
        }
    }

    #[test]
    fn sign_in_redirects_to_the_login_form_with_next() {
        let response = PageError::SignIn { next: "/connect/abc".into() }.into_response();
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        assert_eq!(response.headers()["location"], "/login?next=/connect/abc");
    }
}
