//! `GET/POST /connect/{id}`: the page an MCP client's URL elicitation opens.
//!
//! GET shows the consent page to the signed-in owner of the authorization; POST (Approve or
//! Deny, CSRF-checked) acts on it. Approving is what redirects to the provider: a GET never does,
//! so a prefetched or forwarded link cannot start an OAuth flow on its own.

use axum::Form;
use axum::extract::rejection::{FormRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::csrf;
use super::error::PageError;
use super::pages::{self, AllowClientPage, ConsentPage, SignOutForm};
use crate::broker::consent;
use crate::broker::flow;
use crate::config::ProviderConfig;
use crate::domain::ElicitationId;
use crate::identity::ClientIdentity;
use crate::identity::browser::{BrowserSession, OptionalBrowserSession};
use crate::identity::next::login_path;
use crate::state::AppState;
use crate::store::authorizations::{AuthorizationKind, AuthorizationRow, AuthorizationStatus};

#[derive(Debug, Default, serde::Deserialize)]
pub struct ConsentForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    action: String,
}

/// The id from the path, or 404 for anything that is not a well-formed elicitation id.
fn parse_id(path: Result<Path<String>, PathRejection>) -> Result<ElicitationId, PageError> {
    let Ok(Path(raw)) = path else { return Err(PageError::not_found()) };
    ElicitationId::parse(&raw).map_err(|_| PageError::not_found())
}

/// The signed-in browser, else 303 to `/login?next=/connect/{id}`.
fn require_session(session: Option<BrowserSession>, id: &ElicitationId) -> Result<BrowserSession, PageError> {
    session.ok_or_else(|| PageError::SignIn { next: format!("/connect/{id}") })
}

/// The row if this browser's user owns it and it still awaits consent; otherwise the page that
/// explains why not. Ownership is checked first, so another account learns nothing about the
/// row's state.
async fn actionable_row(
    state: &AppState,
    id: &ElicitationId,
    session: &BrowserSession,
) -> Result<AuthorizationRow, PageError> {
    let row = state.store.authorization(id.as_str()).await?.ok_or_else(PageError::not_found)?;
    // MCP 2025-11-25 client/elicitation §Phishing: the user who opens the URL must be the user
    // the elicitation was created for; a forwarded link must not bind another account's tokens.
    if row.user_id != session.user.id {
        tracing::warn!(authorization_id = %row.id, "connect link opened by another account");
        return Err(PageError::Page {
            status: StatusCode::FORBIDDEN,
            title: "Wrong account".into(),
            message: "This link was created for another account. Sign out and sign in as the account that started it."
                .into(),
            sign_out: Some(SignOutForm {
                csrf_token: session.csrf_token.clone(),
                next: login_path(&format!("/connect/{id}")),
            }),
        });
    }
    let page = |status, title: &str, message: &str| Err(PageError::page(status, title, message));
    match row.status {
        AuthorizationStatus::Completed if row.kind == AuthorizationKind::Consent => {
            page(StatusCode::OK, "Already allowed", "Already allowed — return to your client.")
        }
        AuthorizationStatus::Completed => {
            page(StatusCode::OK, "Already connected", "Already connected — return to your client.")
        }
        AuthorizationStatus::Declined => page(
            StatusCode::GONE,
            "Request declined",
            "You declined this request. If you change your mind, ask your client to try again.",
        ),
        AuthorizationStatus::Failed => {
            page(StatusCode::GONE, "Connection failed", "This connection attempt failed. Ask your client to try again.")
        }
        AuthorizationStatus::Exchanging => page(
            StatusCode::CONFLICT,
            "Connection in progress",
            "This connection is being completed. Return to your client.",
        ),
        AuthorizationStatus::Pending | AuthorizationStatus::Redirected if row.is_expired(state.now()) => {
            page(StatusCode::GONE, "Link expired", "This link has expired; ask your client to try again.")
        }
        AuthorizationStatus::Pending | AuthorizationStatus::Redirected => Ok(row),
    }
}

// MCP 2025-11-25 client/elicitation §URL mode (the server's own connect page);
// MCP security best practices §Confused deputy (consent names the client, scopes, redirect).
/// `GET /connect/{id}`: the consent page.
pub async fn show(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    OptionalBrowserSession(session): OptionalBrowserSession,
) -> Result<Response, PageError> {
    let id = parse_id(path)?;
    let session = require_session(session, &id)?;
    let row = actionable_row(&state, &id, &session).await?;
    let provider = state.providers.find(&row.provider).ok_or_else(provider_missing)?;
    let client_identity = if row.client_key.is_empty() {
        // Created before consents were per client: the token's client was not recorded.
        "An MCP client (asked before this broker recorded which client asks)".to_owned()
    } else {
        consent::describe_client(&state, &ClientIdentity::from_key(&row.client_key)).await
    };
    if row.kind == AuthorizationKind::Consent {
        return allow_page(&state, &row, provider, client_identity, &session).await;
    }
    let page = ConsentPage {
        id: row.id.clone(),
        client_identity,
        client_name: row.client_name.clone().filter(|n| !n.trim().is_empty()),
        provider_name: provider.display_name.clone(),
        provider_id: provider.id.to_string(),
        scopes: row.scopes.iter().map(str::to_owned).collect(),
        authorization_host: provider.authorization_url.host_str().unwrap_or_default().to_owned(),
        redirect_uri: state.config.redirect_uri().to_string(),
        username: session.display_name().to_owned(),
        csrf_token: session.csrf_token.clone(),
    };
    let mut response = pages::render(StatusCode::OK, &page);
    // Approving answers the POST with a redirect to the provider (web::security_headers).
    super::security_headers::allow_form_redirects_to(&mut response, [&provider.authorization_url]);
    Ok(response)
}

/// `POST /connect/{id}` (`csrf_token`, `action=approve|deny`): 303 to the provider, or the
/// "declined" page.
pub async fn act(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    form: Result<Form<ConsentForm>, FormRejection>,
) -> Result<Response, PageError> {
    let id = parse_id(path)?;
    let session = require_session(session, &id)?;
    let row = actionable_row(&state, &id, &session).await?;
    let Ok(Form(form)) = form else { return Err(PageError::bad_request()) };
    // MCP security best practices §Confused deputy: consent carries CSRF protection.
    if !csrf::session_token_matches(&session, &form.csrf_token) {
        tracing::warn!(authorization_id = %row.id, "consent form with a wrong CSRF token");
        return Err(PageError::csrf());
    }
    match (form.action.as_str(), row.kind) {
        ("approve", AuthorizationKind::Connect) => {
            let url = flow::begin(&state, &row, &session).await?;
            Ok(pages::see_other(url.as_str()))
        }
        ("approve", AuthorizationKind::Consent) => {
            flow::allow(&state, &row, &session).await?;
            Ok(pages::message(StatusCode::OK, "Allowed", "The client may now use this connection; return to it."))
        }
        ("deny", _) => {
            flow::decline(&state, &row, &session).await?;
            Ok(pages::message(StatusCode::OK, "Declined", "You declined; return to your client."))
        }
        _ => Err(PageError::bad_request()),
    }
}

/// The consent-only page: the connection it is about, and what this client was allowed before.
async fn allow_page(
    state: &AppState,
    row: &AuthorizationRow,
    provider: &ProviderConfig,
    client_identity: String,
    session: &BrowserSession,
) -> Result<Response, PageError> {
    let grant = flow::consent_target(state, row).await?;
    let previously_allowed = match state.store.consent(&grant.id, &row.client_key).await? {
        Some(consent) => consent.scopes.iter().map(str::to_owned).collect(),
        None => Vec::new(),
    };
    let page = AllowClientPage {
        id: row.id.clone(),
        client_identity,
        client_name: row.client_name.clone().filter(|n| !n.trim().is_empty()),
        provider_name: provider.display_name.clone(),
        provider_id: provider.id.to_string(),
        account: grant.account_label.clone().unwrap_or_else(|| "(unnamed)".into()),
        scopes: row.scopes.iter().map(str::to_owned).collect(),
        previously_allowed,
        username: session.display_name().to_owned(),
        csrf_token: session.csrf_token.clone(),
    };
    Ok(pages::render(StatusCode::OK, &page))
}

fn provider_missing() -> PageError {
    PageError::page(
        StatusCode::NOT_FOUND,
        "Provider not available",
        "This provider is no longer available on this broker. Ask your client to try again.",
    )
}
