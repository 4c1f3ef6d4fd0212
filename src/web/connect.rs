//! `GET/POST /connect/{id}`: the page an MCP client's URL elicitation opens.
//!
//! GET shows the consent page to the signed-in owner of the authorization; POST (Approve or
//! Deny, CSRF-checked) acts on it. Approving is what redirects to the provider: a GET never does,
//! so a prefetched or forwarded link cannot start an OAuth flow on its own. An API-key
//! provider's page asks for the key instead, and its POST (`action=connect_key`) finishes the
//! connect there ([`super::api_keys`]).

use axum::Form;
use axum::extract::rejection::{FormRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::pages::{AllowClientPage, AllowServerPage, ConsentPage, OrgLine, ScopeLine};
use crate::broker::consent;
use crate::broker::flow;
use crate::broker::provider_apps::{self, AppError};
use crate::config::ProviderConfig;
use crate::display::{ClientName, safe_text};
use crate::domain::ElicitationId;
use crate::html::{self, PageError, START_AGAIN, SignOutForm, SignedIn, csrf};
use crate::identity::ClientIdentity;
use crate::identity::browser::{BrowserSession, OptionalBrowserSession};
use crate::identity::next::login_path;
use crate::state::AppState;
use crate::store::authorizations::{AuthorizationKind, AuthorizationRow, AuthorizationStatus};

#[derive(Default, serde::Deserialize)]
pub struct ConsentForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    action: String,
    /// `action=connect_key` on an API-key provider's page ([`super::api_keys`]). A secret.
    #[serde(default)]
    api_key: String,
}

impl std::fmt::Debug for ConsentForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsentForm").field("action", &self.action).finish_non_exhaustive()
    }
}

/// The id from the path, or 404 for anything that is not a well-formed elicitation id.
pub(super) fn parse_id(path: Result<Path<String>, PathRejection>) -> Result<ElicitationId, PageError> {
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
    let row = state.core.store.authorizations().by_id(id.as_str()).await?.ok_or_else(PageError::not_found)?;
    // MCP 2025-11-25 client/elicitation §Phishing: the user who opens the URL must be the user
    // the elicitation was created for; a forwarded link must not bind another account's tokens.
    if row.user_id != session.user.id {
        tracing::warn!(authorization_id = %row.id, "connect link opened by another account");
        return Err(PageError::Page {
            status: StatusCode::FORBIDDEN,
            title: "Wrong account".into(),
            message: format!(
                "This link was created for another account than the one signed in here ({}).",
                safe_text(session.display_name())
            ),
            next_step: "Sign out, then sign in as the account that started it.".into(),
            sign_out: Some(SignOutForm {
                csrf_token: session.csrf_token.clone(),
                next: login_path(&format!("/connect/{id}")),
            }),
        });
    }
    let page = |status, title: &str, message: &str, next: &str| Err(PageError::page(status, title, message, next));
    let back = "Return to your MCP client: it carries on by itself (or call the tool again there).";
    match row.status {
        AuthorizationStatus::Completed if row.kind == AuthorizationKind::Server => {
            page(StatusCode::OK, "Already allowed", "You already allowed this client to call this server.", back)
        }
        AuthorizationStatus::Completed if row.kind == AuthorizationKind::Consent => {
            page(StatusCode::OK, "Already allowed", "You already allowed this client to use this connection.", back)
        }
        AuthorizationStatus::Completed => {
            page(StatusCode::OK, "Already connected", "This account is already connected through this link.", back)
        }
        AuthorizationStatus::Declined => page(
            StatusCode::GONE,
            "Request declined",
            "You declined this request, so nothing was connected or shared.",
            "If you change your mind, start again from your MCP client: call the tool again for a new link.",
        ),
        AuthorizationStatus::Failed => {
            Err(row.failure.as_deref().and_then(flow::failure_error).map_or_else(attempt_failed, PageError::from))
        }
        AuthorizationStatus::Exchanging => page(
            StatusCode::CONFLICT,
            "Connection in progress",
            "The broker is finishing this connection with the provider right now.",
            "Return to your MCP client; it hears when the connection is ready.",
        ),
        AuthorizationStatus::Pending | AuthorizationStatus::Redirected if row.is_expired(state.core.now()) => {
            Err(PageError::from(flow::FlowError::Expired))
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
    let client = client_of(&state, &row).await;
    let server = server_of(&state, &row).await?;
    if row.kind == AuthorizationKind::Server {
        let server = server.ok_or_else(|| PageError::from(flow::FlowError::ServerGone))?;
        let page = AllowServerPage {
            id: row.id.clone(),
            client,
            client_name: self_reported_name(&row),
            server,
            nav: SignedIn::of(&session),
        };
        return Ok(html::render(StatusCode::OK, &page));
    }
    let provider = state.core.providers.find(&row.provider).ok_or_else(provider_missing)?;
    if row.kind == AuthorizationKind::Consent {
        return allow_page(&state, &row, &provider, client, server, &session).await;
    }
    if provider.is_api_key() {
        return Ok(super::api_keys::page(&row, &provider, client, self_reported_name(&row), &session, None));
    }
    // The app Approve goes to: the organization's own at this provider, or the operator's (a
    // refusal now rather than after the click when neither may be used).
    let chosen =
        provider_apps::for_connect(&state.core, &row.organization, &provider).await.map_err(|error| match error {
            AppError::NoApp { provider_name } => PageError::from(flow::FlowError::NoOrganizationApp(provider_name)),
            AppError::Store(e) => PageError::from(e),
            other => PageError::Internal(Box::new(other)),
        })?;
    let organization = OrgLine {
        name: organization_name(&state, &row).await?,
        own_app_client_id: chosen.app_id.as_ref().map(|_| chosen.config.client_id.clone()),
    };
    let authorization_url = chosen.config.authorization_url.clone();
    let page = ConsentPage {
        id: row.id.clone(),
        client,
        client_name: self_reported_name(&row),
        provider_name: provider.display_name.clone(),
        provider_id: provider.id.to_string(),
        scopes: ScopeLine::list(&provider, &row.scopes),
        authorization_host: authorization_url.host_str().unwrap_or_default().to_owned(),
        redirect_uri: state.core.config.provider_redirect_uri(&provider.id).to_string(),
        server,
        organization,
        nav: SignedIn::of(&session),
    };
    let mut response = html::render(StatusCode::OK, &page);
    // Approving answers the POST with a redirect to the provider (`crate::html::security_headers`).
    crate::html::security_headers::allow_form_redirects_to(&mut response, [&authorization_url]);
    Ok(response)
}

/// The name of the organization `row` acts in, as its pages show it.
async fn organization_name(state: &AppState, row: &AuthorizationRow) -> Result<String, PageError> {
    let org = state.core.store.organizations().by_id(&row.organization).await?;
    Ok(org.map_or_else(|| row.organization.to_string(), |o| o.name))
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
            let url = flow::begin(&state.core, &row, &session).await?;
            Ok(html::see_other(url.as_str()))
        }
        ("connect_key", AuthorizationKind::Connect) => {
            let provider = state.core.providers.find(&row.provider).ok_or_else(provider_missing)?;
            let client = (client_of(&state, &row).await, self_reported_name(&row));
            super::api_keys::submit(&state, &row, &provider, &session, &form.api_key, client).await
        }
        ("approve", AuthorizationKind::Consent) => {
            flow::allow(&state.core, &row, &session).await?;
            Ok(html::message(
                StatusCode::OK,
                "Allowed",
                "The client may now use this connection. You can withdraw that any time on My connections.",
                "Return to your MCP client: it carries on by itself (or call the tool again there).",
            ))
        }
        ("approve", AuthorizationKind::Server) => {
            crate::broker::gateway_consent::approve(&state.core, &row, &session).await?;
            Ok(html::message(
                StatusCode::OK,
                "Allowed",
                "The client may now call this server. You can withdraw that any time on My connections.",
                "Return to your MCP client: it carries on by itself (or call the tool again there).",
            ))
        }
        ("deny", _) => {
            flow::decline(&state.core, &row, &session).await?;
            Ok(html::message(
                StatusCode::OK,
                "Declined",
                "You declined, so nothing was connected or shared.",
                "Return to your MCP client. If you change your mind, call the tool again there for a new link.",
            ))
        }
        _ => Err(PageError::bad_request()),
    }
}

/// The consent-only page: the connection it is about, and what this client was allowed before.
async fn allow_page(
    state: &AppState,
    row: &AuthorizationRow,
    provider: &ProviderConfig,
    client: ClientName,
    server: Option<String>,
    session: &BrowserSession,
) -> Result<Response, PageError> {
    let grant = flow::consent_target(&state.core, row).await?;
    let previously_allowed = match state.core.store.consents().find(&grant.id, &row.client_key).await? {
        Some(consent) => consent.scopes.iter().map(str::to_owned).collect(),
        None => Vec::new(),
    };
    let page = AllowClientPage {
        id: row.id.clone(),
        client,
        client_name: self_reported_name(row),
        provider_name: provider.display_name.clone(),
        provider_id: provider.id.to_string(),
        account: grant.account_label.as_deref().map_or_else(|| "(unnamed)".into(), safe_text),
        scopes: ScopeLine::list(provider, &row.scopes),
        previously_allowed,
        server,
        nav: SignedIn::of(session),
    };
    Ok(html::render(StatusCode::OK, &page))
}

/// The client that asked, as its token identifies it.
async fn client_of(state: &AppState, row: &AuthorizationRow) -> ClientName {
    if row.client_key.is_empty() {
        // Created before consents were per client: the token's client was not recorded.
        ClientName::new("An MCP client", "asked before this broker recorded which client asks")
    } else {
        consent::client_name(&state.core, &ClientIdentity::from_key(&row.client_key)).await
    }
}

/// The registered name of the server whose (client, server) pair the row approves, if any;
/// the page refuses a row whose server was removed meanwhile.
async fn server_of(state: &AppState, row: &AuthorizationRow) -> Result<Option<String>, PageError> {
    let Some(server_id) = row.server_id.as_deref() else { return Ok(None) };
    match state.core.store.gateway_servers().name_of(server_id).await? {
        Some(name) => Ok(Some(safe_text(&name))),
        None => Err(PageError::from(flow::FlowError::ServerGone)),
    }
}

/// The name the MCP client gave itself in `initialize` (`clientInfo`), as display text.
fn self_reported_name(row: &AuthorizationRow) -> Option<String> {
    row.client_name.as_deref().map(safe_text).filter(|n| !n.is_empty())
}

fn provider_missing() -> PageError {
    PageError::from(flow::FlowError::UnknownProvider(String::new()))
}

/// A failed row whose reason the flow does not name (or an older row without one).
pub(super) fn attempt_failed() -> PageError {
    PageError::page(
        StatusCode::GONE,
        "Connection failed",
        "This connection attempt failed, so nothing was connected.",
        START_AGAIN,
    )
}
