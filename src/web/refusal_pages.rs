//! What the hosted pages say for the core's and identity's own refusals: the connect flow's
//! ([`FlowError`]) and the OIDC sign-in's ([`SignInError`]), each a [`PageError`] page saying
//! what happened and what to do now.

use axum::http::StatusCode;

use crate::broker::flow::FlowError;
use crate::html::{PageError, START_AGAIN};
use crate::identity::oidc::browser_login::SignInError;

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
            FlowError::NoOrganizationApp(provider) => Self::page(
                S::CONFLICT,
                "Not available for your organization yet",
                format!(
                    "Your organization has not set up its own app at {provider}, and this broker keeps its own app for its default organization. {nothing}"
                ),
                "Ask your organization's admin to set the organization's app for this provider, then start again from your MCP client.",
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

#[cfg(test)]
mod tests {
    use axum::response::IntoResponse;

    use super::*;
    use crate::store::StoreError;

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
            FlowError::NoOrganizationApp("GitHub".into()),
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
                | FlowError::NoOrganizationApp(_)
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
}
