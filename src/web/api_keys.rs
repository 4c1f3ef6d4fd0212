//! The hosted pages' side of API-key connections ([`crate::broker::api_key`]): the connect page
//! of an API-key provider (the same `/connect/{id}` as OAuth — sign-in, owner only, CSRF — with
//! a key field instead of a redirect), and `POST /connections/key`, replacing a connection's key.
//!
//! The key field is a password input with autocomplete off; the key travels only in the POST
//! body, is never put back into a page (a refused key is not refilled), and a connection shows
//! at most its last four characters.

use askama::Template;
use axum::Form;
use axum::extract::State;
use axum::extract::rejection::FormRejection;
use axum::http::StatusCode;
use axum::response::Response;

use crate::broker::api_key::{self, KeyError};
use crate::broker::tokens::TokenError;
use crate::config::ProviderConfig;
use crate::display::ClientName;
use crate::html::{self, PageError, SignedIn};
use crate::identity::browser::{BrowserSession, OptionalBrowserSession};
use crate::state::AppState;
use crate::store::authorizations::AuthorizationRow;

/// The connect page of an API-key provider.
#[derive(Template)]
#[template(path = "connect_key.html")]
pub struct ConnectKeyPage {
    pub id: String,
    pub client_name: Option<String>,
    pub client: ClientName,
    pub provider_name: String,
    pub provider_id: String,
    /// Where the key goes (the API base's host).
    pub api_host: String,
    /// Whether the provider's entry says how to check a key.
    pub checked: bool,
    pub key_url: Option<String>,
    /// `ghp_ or github_pat_`, as a hint.
    pub key_prefixes: Option<String>,
    /// Why the last key was not taken.
    pub error: Option<String>,
    pub nav: SignedIn,
}

/// The page asking `session`'s user for a key for `row`'s provider.
pub(super) fn page(
    row: &AuthorizationRow,
    provider: &ProviderConfig,
    client: ClientName,
    client_name: Option<String>,
    session: &BrowserSession,
    error: Option<(StatusCode, String)>,
) -> Response {
    let spec = provider.api_key.as_ref();
    let prefixes = spec.map(|s| s.key_prefixes.clone()).unwrap_or_default();
    let (status, error) = match error {
        Some((status, message)) => (status, Some(message)),
        None => (StatusCode::OK, None),
    };
    let page = ConnectKeyPage {
        id: row.id.clone(),
        client_name,
        client,
        provider_name: provider.display_name.clone(),
        provider_id: provider.id.to_string(),
        api_host: provider.api_base_url.host_str().unwrap_or_default().to_owned(),
        checked: spec.is_some_and(|s| s.validation.is_some()),
        key_url: spec.and_then(|s| s.key_url.as_ref()).map(|u| u.to_string()),
        key_prefixes: (!prefixes.is_empty()).then(|| prefixes.join(" or ")),
        error,
        nav: SignedIn::of(session),
    };
    html::render(status, &page)
}

/// The owner submitted a key on the connect page (CSRF already checked): connected → the
/// result page, as after an OAuth callback; refused → the same page with the provider's reason.
pub(super) async fn submit(
    state: &AppState,
    row: &AuthorizationRow,
    provider: &ProviderConfig,
    session: &BrowserSession,
    raw_key: &str,
    client: (ClientName, Option<String>),
) -> Result<Response, PageError> {
    match api_key::connect(&state.core, row, session, raw_key).await {
        Ok(connected) => Ok(html::see_other(&format!("/connect/{}/result", connected.authorization_id))),
        Err(error) => {
            let shown = refusal(provider, error)?;
            Ok(page(row, provider, client.0, client.1, session, Some(shown)))
        }
    }
}

/// A refused key as the page says it (status and text), or the error page for the rest.
fn refusal(provider: &ProviderConfig, error: KeyError) -> Result<(StatusCode, String), PageError> {
    let name = &provider.display_name;
    Ok(match error {
        KeyError::Format(why) => (StatusCode::BAD_REQUEST, format!("That is not a key: {why}. Nothing was stored.")),
        KeyError::Refused { reason, looks_right } => {
            let hint = match (&provider.api_key, looks_right) {
                (Some(spec), false) => format!(" (and {name} keys begin with {})", spec.key_prefixes.join(" or ")),
                _ => String::new(),
            };
            (StatusCode::BAD_REQUEST, format!("{name} refused this key: {reason}{hint}. Nothing was stored."))
        }
        KeyError::Unavailable => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{name} could not check the key right now. Nothing was stored; try again in a moment."),
        ),
        KeyError::NoAccount => (
            StatusCode::BAD_GATEWAY,
            format!("{name} accepted the key but did not say which account it is for. Nothing was stored."),
        ),
        KeyError::Flow(error) => return Err(PageError::from(error)),
        KeyError::Token(TokenError::Store(error)) => return Err(PageError::from(error)),
        KeyError::Token(error) => return Err(PageError::internal(error)),
    })
}

/// `POST /connections/key`: the form to replace a connection's key.
#[derive(serde::Deserialize)]
pub struct ReplaceForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    grant_id: String,
    #[serde(default)]
    api_key: String,
}

impl std::fmt::Debug for ReplaceForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplaceForm").field("grant_id", &self.grant_id).finish_non_exhaustive()
    }
}

const BACK: &str = "Go back to My connections and reload it to see what is there now.";

/// `POST /connections/key` (`csrf_token`, `grant_id`, `api_key`): the user's own API-key
/// connection gets the new key once the provider accepts it; 303 back to My connections.
pub async fn replace(
    State(state): State<AppState>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    form: Result<Form<ReplaceForm>, FormRejection>,
) -> Result<Response, PageError> {
    let session = session.ok_or_else(|| PageError::SignIn { next: "/connections".into() })?;
    let Ok(Form(form)) = form else { return Err(PageError::bad_request()) };
    if !crate::html::csrf::session_token_matches(&session, &form.csrf_token) {
        return Err(PageError::csrf());
    }
    // Looked up among this user's own connections: another user's id replaces nothing.
    let grants = state.core.store.grants().for_user(&session.user.id).await?;
    let found = grants.iter().find(|g| g.id == form.grant_id);
    let (Some(grant), Some(provider)) = (found, found.and_then(|g| state.core.providers.find(&g.provider))) else {
        return Err(PageError::page(
            StatusCode::NOT_FOUND,
            "Not found",
            "That connection does not exist (any more), so nothing changed.",
            BACK,
        ));
    };
    match api_key::replace(&state.core, &session.user.id, grant, &form.api_key).await {
        Ok(()) => {
            tracing::info!(user_id = %session.user.id, provider = %grant.provider, "API key replaced from the connections page");
            Ok(html::see_other("/connections"))
        }
        Err(error) => {
            let (status, message) = refusal(&provider, error)?;
            Err(PageError::page(status, "Key not replaced", message, BACK))
        }
    }
}
