//! `GET /oauth/callback/{provider}` (and the older shared `/oauth/callback`): where providers
//! send the browser back (RFC 6749 §4.1.2).
//!
//! The callback URL carries the code, the state and `iss`, so no page is ever shown at it: every
//! answer is a 303 to a clean address (RFC 9700 §4.2.4, §4.3: a URL with a code must not stay in
//! the address bar, the history, or a `Referer`). Where the browser was shown to be the
//! approving owner's, that is the authorization's result page, `/connect/{id}/result`
//! ([`super::result`], owner only); otherwise a fixed problem page,
//! `/oauth/callback/problem/{problem}`, that says only what went wrong in general and names no
//! authorization. All checks live in [`crate::broker::flow::complete`].

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};

use crate::broker::flow::{self, CallbackError, CallbackParams, FlowError};
use crate::html::{self, PageError};
use crate::identity::browser::OptionalBrowserSession;
use crate::state::AppState;

// RFC 6749 §4.1.2, RFC 9700 §4.4.2 and §4.5, RFC 9207 §2.4.
/// `GET /oauth/callback/{provider}?code&state&iss` (or `error&error_description`): always a
/// 303. Each provider has its own, so a response is only taken for that provider's attempts.
pub async fn receive_for_provider(
    State(state): State<AppState>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    provider: Result<Path<String>, PathRejection>,
    query: Result<Query<CallbackParams>, QueryRejection>,
) -> Response {
    let Ok(Path(provider)) = provider else { return html::see_other(&Problem::NotValid.path()) };
    answer(&state, session, query, flow::Arrival::Provider(&provider)).await
}

/// `GET /oauth/callback`: the callback every provider shared before each had its own; it still
/// completes the attempts that were sent to a provider with it (before the upgrade), and no
/// others.
pub async fn receive(
    State(state): State<AppState>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    query: Result<Query<CallbackParams>, QueryRejection>,
) -> Response {
    answer(&state, session, query, flow::Arrival::Shared).await
}

async fn answer(
    state: &AppState,
    session: Option<crate::identity::browser::BrowserSession>,
    query: Result<Query<CallbackParams>, QueryRejection>,
    arrival: flow::Arrival<'_>,
) -> Response {
    // An unparseable query (a repeated parameter, say) is treated like a missing state.
    let Ok(Query(params)) = query else { return html::see_other(&Problem::NotValid.path()) };
    match flow::complete(&state.core, &params, session.as_ref(), arrival).await {
        Ok(connected) => html::see_other(&result_path(&connected.authorization_id)),
        Err(CallbackError { error, authorization_id }) => {
            if matches!(error, FlowError::Store(_) | FlowError::Internal(_)) {
                tracing::error!(error = %crate::error_chain::Chain(&error), "callback failed");
            }
            match (authorization_id, Problem::of(&error)) {
                // A reload by the owner's browser of a callback already taken (the exchange
                // running, finished or interrupted): its result page says which.
                (Some(id), _) if matches!(error, FlowError::AlreadyUsed) => html::see_other(&result_path(&id)),
                (_, Some(problem)) => html::see_other(&problem.path()),
                // The row now records why it failed; its result page says so, to its owner only.
                (Some(id), None) => html::see_other(&result_path(&id)),
                (None, None) => html::see_other(&Problem::Internal.path()),
            }
        }
    }
}

fn result_path(authorization_id: &str) -> String {
    format!("/connect/{authorization_id}/result")
}

/// A callback that cannot be tied to a finished attempt of this browser's owner: the only
/// thing the problem page may say, so the URL holds nothing but one of these words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// Unknown, forged or already used state; an unparseable query.
    NotValid,
    OtherBrowser,
    Expired,
    IssuerMismatch,
    /// The response arrived at another provider's callback (a mix-up).
    WrongCallback,
    UnknownProvider,
    /// Our side failed (logged at the callback).
    Internal,
}

impl Problem {
    const ALL: [Problem; 7] = [
        Problem::NotValid,
        Problem::OtherBrowser,
        Problem::Expired,
        Problem::IssuerMismatch,
        Problem::WrongCallback,
        Problem::UnknownProvider,
        Problem::Internal,
    ];

    /// The problem page for `error`, or `None` for errors recorded on the row itself (shown
    /// on its result page).
    fn of(error: &FlowError) -> Option<Self> {
        match error {
            FlowError::UnknownState | FlowError::AlreadyUsed => Some(Problem::NotValid),
            FlowError::OtherBrowser | FlowError::WrongUser => Some(Problem::OtherBrowser),
            FlowError::Expired => Some(Problem::Expired),
            FlowError::IssuerMismatch => Some(Problem::IssuerMismatch),
            FlowError::WrongCallback => Some(Problem::WrongCallback),
            FlowError::UnknownProvider(_) => Some(Problem::UnknownProvider),
            FlowError::Store(_) => Some(Problem::Internal),
            FlowError::Internal(_)
            | FlowError::NoOrganizationApp(_)
            | FlowError::NotActionable
            | FlowError::GrantGone
            | FlowError::ServerGone
            | FlowError::ConnectionChanged
            | FlowError::ProviderRefused(_)
            | FlowError::MissingCode
            | FlowError::VerifierUnreadable
            | FlowError::Interrupted
            | FlowError::ExchangeFailed(_) => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Problem::NotValid => "not-valid",
            Problem::OtherBrowser => "other-browser",
            Problem::Expired => "expired",
            Problem::IssuerMismatch => "issuer-mismatch",
            Problem::WrongCallback => "wrong-callback",
            Problem::UnknownProvider => "unknown-provider",
            Problem::Internal => "internal",
        }
    }

    fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == raw)
    }

    fn path(self) -> String {
        format!("/oauth/callback/problem/{}", self.as_str())
    }

    fn page(self) -> PageError {
        let error = match self {
            Problem::NotValid => FlowError::UnknownState,
            Problem::OtherBrowser => FlowError::OtherBrowser,
            Problem::Expired => FlowError::Expired,
            Problem::IssuerMismatch => FlowError::IssuerMismatch,
            Problem::WrongCallback => FlowError::WrongCallback,
            Problem::UnknownProvider => FlowError::UnknownProvider(String::new()),
            // The cause was logged when the callback failed; this page only says so.
            Problem::Internal => return PageError::went_wrong(),
        };
        PageError::from(error)
    }
}

/// `GET /oauth/callback/problem/{problem}`: the page a refused callback lands on.
pub async fn problem(path: Result<Path<String>, PathRejection>) -> Response {
    match path.ok().and_then(|Path(raw)| Problem::parse(&raw)) {
        Some(problem) => problem.page().into_response(),
        None => PageError::not_found().into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_round_trips_through_its_path() {
        for problem in Problem::ALL {
            let path = problem.path();
            assert_eq!(Problem::parse(path.rsplit('/').next().unwrap()), Some(problem));
        }
    }
}
