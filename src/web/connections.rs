//! `GET /connections`: the signed-in user's connections, each with a Revoke button and the
//! clients allowed to use it (each with its own Revoke), and `POST /logout/everywhere` (end
//! every browser session of this user).
//!
//! Revoking a connection is the same as `disconnect_account`: the tokens are revoked at the
//! provider (RFC 7009) and deleted, with every client's consent to use them. Revoking a client's
//! consent leaves the connection in place; that client asks again next time. Every form carries
//! the session's CSRF token, and ids posted back are looked up among this user's own rows, so
//! another user's id revokes nothing.

use axum::Form;
use axum::extract::rejection::FormRejection;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::Response;

use super::pages::{AppRow, ClientConsentRow, ConnectionRow, ConnectionsPage, ServerApprovalRow};
use crate::broker::connections;
use crate::broker::consent;
use crate::broker::tokens::Revocation;
use crate::display::{ClientName, safe_text};
use crate::domain::Scopes;
use crate::html::{self, PageError, SignedIn};
use crate::identity::ClientIdentity;
use crate::identity::browser::{self, BrowserSession, OptionalBrowserSession};
use crate::state::AppState;
use crate::store::grants::ConsentRow;
use crate::store::grants::GrantRow;

/// `?revocation=…&provider=…`, where a revocation redirects: what to tell the user.
#[derive(serde::Deserialize, Default)]
pub struct Notice {
    revocation: Option<String>,
    provider: Option<String>,
}

pub async fn show(
    State(state): State<AppState>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    Query(notice): Query<Notice>,
) -> Result<Response, PageError> {
    let Some(session) = session else { return Ok(html::see_other("/login?next=/connections")) };
    // The core's listing; this page shows the accounts the user holds (not the providers they
    // have not connected), each with every client allowed to use it.
    let listing = connections::connections(&state.core, &session.user.id, None).await?;
    let consents = state.core.store.consents().for_user(&session.user.id).await?;
    let mut names = Vec::with_capacity(consents.len());
    for consent in &consents {
        names.push(consent::client_name(&state.core, &ClientIdentity::from_key(&consent.client_key)).await);
    }
    let mut key_hints = Vec::new();
    for connection in &listing {
        key_hints.push(match &connection.grant {
            Some(grant) => crate::broker::api_key::hint(&state.core, grant).await,
            None => None,
        });
    }
    let rows = listing
        .iter()
        .zip(key_hints)
        .filter_map(|(c, key_hint)| {
            let g = c.grant.as_ref()?;
            Some(ConnectionRow {
                key_hint,
                clients: client_rows(g, &consents, &names),
                grant_id: g.id.clone(),
                provider: c.provider_name().to_owned(),
                account: g.account_label.as_deref().map_or_else(|| "—".into(), safe_text),
                scopes: g.scopes.to_space_separated(),
                status: c.state.describe(),
                status_code: c.state.code(),
                // A connection the provider no longer honours, or whose refresh keeps failing,
                // is offered a reconnect.
                reconnect: c.state.needs_reconnect() || c.state.last_error().is_some(),
            })
        })
        .collect();
    let apps = app_rows(&state, &session.user.id).await?;
    let servers = server_rows(&state, &session.user.id).await?;
    let notice = notice_text(&state, &notice);
    let page = ConnectionsPage { nav: SignedIn::of(&session), rows, apps, servers, notice };
    Ok(html::render(StatusCode::OK, &page))
}

/// The outcome of a revocation, told truthfully: fixed text per outcome, and only a configured
/// provider's own name (a crafted link can show nothing else).
fn notice_text(state: &AppState, notice: &Notice) -> Option<String> {
    let name = &state.core.providers.find(notice.provider.as_deref()?)?.display_name;
    let revocation = Revocation::from_code(notice.revocation.as_deref()?)?;
    Some(match revocation {
        Revocation::Revoked => format!("Your {name} connection was revoked at {name} and deleted here."),
        Revocation::NotOffered => format!(
            "Your {name} connection was deleted here. {name} offers no revocation: to remove the broker's access there too, do it in your {name} account settings."
        ),
        Revocation::Failed => format!(
            "Your {name} connection was deleted here, but {name} did not confirm the revocation: remove the broker's access in your {name} account settings to be sure."
        ),
        Revocation::TokenUnreadable => format!(
            "Your {name} connection was deleted here; its stored tokens could not be read, so nothing could be sent to {name}: remove the broker's access in your {name} account settings to be sure."
        ),
    })
}

/// The MCP clients with a live delegation at the broker's authorization server, one row each.
async fn app_rows(state: &AppState, user_id: &str) -> Result<Vec<AppRow>, PageError> {
    let delegations = state.core.store.oauth_grants().active_for_user(user_id).await?;
    // Scopes gathered per client first, then written once: the page shows text.
    let mut apps: Vec<(AppRow, Scopes)> = Vec::new();
    for delegation in delegations {
        if let Some((_, held)) = apps.iter_mut().find(|(a, _)| a.client_id == delegation.client_id) {
            *held = held.union(&delegation.scope);
            continue;
        }
        let client =
            consent::client_name(&state.core, &ClientIdentity::OAuthClient(delegation.client_id.clone())).await;
        let row = AppRow {
            client_id: delegation.client_id,
            client,
            scopes: String::new(),
            since: day(delegation.created_at),
        };
        apps.push((row, delegation.scope));
    }
    Ok(apps.into_iter().map(|(row, scopes)| AppRow { scopes: scopes.to_space_separated(), ..row }).collect())
}

#[derive(serde::Deserialize)]
pub struct RevokeAppForm {
    csrf_token: String,
    client_id: String,
}

impl PostedForm for RevokeAppForm {
    fn csrf_token(&self) -> &str {
        &self.csrf_token
    }
}

/// `POST /connections/apps/revoke`: signs an MCP client out of the broker for this user (its
/// delegations are revoked). Its access and refresh tokens stop working at once, and its
/// consents to use connections go too, so if it signs in again it asks again.
pub async fn revoke_app(
    State(state): State<AppState>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    form: Result<Form<RevokeAppForm>, FormRejection>,
) -> Result<Response, PageError> {
    let (session, form) = checked(session, form)?;
    let now = state.core.now();
    let revoked = state.core.store.oauth_grants().revoke_of_client(&session.user.id, &form.client_id, now).await?;
    if revoked == 0 {
        return Err(PageError::page(
            StatusCode::NOT_FOUND,
            "Not found",
            "That app has no access to end (any more), so nothing changed.",
            BACK,
        ));
    }
    let client_key = ClientIdentity::OAuthClient(form.client_id.clone()).key();
    let consents = state.core.store.consents().revoke_client(&session.user.id, &client_key).await?;
    let servers = state.core.store.gateway_consents().withdraw_client(&session.user.id, &client_key).await?;
    let detail = format!("client={} grants={revoked} consents={consents} servers={servers}", form.client_id);
    state
        .core
        .store
        .audit()
        .record_implied(now, Some(&session.user.id), "oauth_client.revoked", None, Some(&detail))
        .await?;
    tracing::info!(user_id = %session.user.id, "an MCP client was signed out of the broker");
    Ok(html::see_other("/connections"))
}

#[derive(serde::Deserialize)]
pub struct RevokeForm {
    csrf_token: String,
    grant_id: String,
}

impl PostedForm for RevokeForm {
    fn csrf_token(&self) -> &str {
        &self.csrf_token
    }
}

pub async fn revoke(
    State(state): State<AppState>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    form: Result<Form<RevokeForm>, FormRejection>,
) -> Result<Response, PageError> {
    let (session, form) = checked(session, form)?;
    let grants = state.core.store.grants().for_user(&session.user.id).await?;
    let Some(grant) = grants.iter().find(|g| g.id == form.grant_id) else {
        return Err(PageError::page(
            StatusCode::NOT_FOUND,
            "Not found",
            "That connection does not exist (any more), so nothing changed.",
            BACK,
        ));
    };
    let Some(provider) = state.core.providers.find(&grant.provider) else {
        return Err(PageError::page(
            StatusCode::CONFLICT,
            "Provider not configured",
            "This provider is no longer configured on this broker, so the connection cannot be revoked from here.",
            "Ask the broker's operator to remove the connection.",
        ));
    };
    let done =
        crate::broker::tokens::disconnect_grant(&state.core, &provider, grant).await.map_err(PageError::internal)?;
    tracing::info!(user_id = %session.user.id, provider = %grant.provider, "connection revoked from the connections page");
    Ok(html::see_other(&format!(
        "/connections?revocation={}&provider={}",
        done.revocation.code(),
        provider.id.as_str()
    )))
}

/// Where a refused form on this page points.
pub(super) const BACK: &str = "Go back to My connections and reload it to see what is there now.";

/// A form posted from the connections page, carrying the session's CSRF token.
pub(super) trait PostedForm {
    fn csrf_token(&self) -> &str;
}

/// The signed-in user and their CSRF-checked form; signed out → sign in, then back here.
pub(super) fn checked<T: PostedForm>(
    session: Option<BrowserSession>,
    form: Result<Form<T>, FormRejection>,
) -> Result<(BrowserSession, T), PageError> {
    let session = session.ok_or_else(|| PageError::SignIn { next: "/connections".into() })?;
    let Ok(Form(form)) = form else { return Err(PageError::bad_request()) };
    if !crate::html::csrf::session_token_matches(&session, form.csrf_token()) {
        return Err(PageError::csrf());
    }
    Ok((session, form))
}

/// The clients allowed to use `grant`, most recently approved first. `names[i]` names
/// `consents[i]`'s client (named now, the one way every page names clients).
fn client_rows(grant: &GrantRow, consents: &[ConsentRow], names: &[ClientName]) -> Vec<ClientConsentRow> {
    let mut rows: Vec<(&ConsentRow, &ClientName)> =
        consents.iter().zip(names).filter(|(c, _)| c.grant_id == grant.id).collect();
    rows.sort_by_key(|(c, _)| std::cmp::Reverse(c.updated_at));
    rows.into_iter()
        .map(|(c, name)| ClientConsentRow {
            client_key: c.client_key.clone(),
            client: name.clone(),
            scopes: c.scopes.to_space_separated(),
            current: c.covers(&grant.scopes),
            since: day(c.updated_at),
        })
        .collect()
}

/// The user's (client, server) approvals for servers behind the broker, by server then client, each client named as every page names it.
async fn server_rows(state: &AppState, user_id: &str) -> Result<Vec<ServerApprovalRow>, PageError> {
    let approvals = state.core.store.gateway_consents().for_user(user_id).await?;
    let names = consent::client_names(&state.core, approvals.iter().map(|a| a.client_key.as_str())).await;
    Ok(approvals
        .into_iter()
        .map(|a| ServerApprovalRow {
            client: names.get(&a.client_key).cloned().unwrap_or_else(|| ClientIdentity::from_key(&a.client_key).name()),
            server: safe_text(&a.server_name),
            since: day(a.created_at),
            server_id: a.server_id,
            client_key: a.client_key,
        })
        .collect())
}

/// `YYYY-MM-DD` (UTC) of a Unix timestamp.
fn day(timestamp: i64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(timestamp.max(0) as u64);
    humantime::format_rfc3339_seconds(time).to_string().chars().take(10).collect()
}

#[derive(serde::Deserialize)]
pub struct RevokeConsentForm {
    csrf_token: String,
    grant_id: String,
    client_key: String,
}

impl PostedForm for RevokeConsentForm {
    fn csrf_token(&self) -> &str {
        &self.csrf_token
    }
}

/// `POST /connections/clients/revoke`: withdraws one client's consent to use one connection.
pub async fn revoke_client(
    State(state): State<AppState>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    form: Result<Form<RevokeConsentForm>, FormRejection>,
) -> Result<Response, PageError> {
    let (session, form) = checked(session, form)?;
    // Scoped to this user in the query itself: another user's grant id deletes nothing.
    if !state.core.store.consents().revoke(&session.user.id, &form.grant_id, &form.client_key).await? {
        return Err(PageError::page(
            StatusCode::NOT_FOUND,
            "Not found",
            "That client had no access to withdraw, so nothing changed.",
            BACK,
        ));
    }
    let grant = state.core.store.grants().for_user(&session.user.id).await?.into_iter().find(|g| g.id == form.grant_id);
    let provider = grant.as_ref().map(|g| g.provider.as_str());
    let detail = format!("grant={} client={}", form.grant_id, form.client_key);
    state
        .core
        .store
        .audit()
        .record_implied(state.core.now(), Some(&session.user.id), "consent.revoked", provider, Some(&detail))
        .await?;
    tracing::info!(user_id = %session.user.id, "a client's access to a connection was withdrawn");
    Ok(html::see_other("/connections"))
}

#[derive(serde::Deserialize)]
pub struct EverywhereForm {
    csrf_token: String,
}

/// Ends every browser session of this user (a lost laptop, a shared computer).
pub async fn logout_everywhere(
    State(state): State<AppState>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    form: Result<Form<EverywhereForm>, FormRejection>,
) -> Result<Response, PageError> {
    let Some(session) = session else { return Ok(html::see_other("/login")) };
    let Ok(Form(form)) = form else { return Err(PageError::bad_request()) };
    if !crate::html::csrf::session_token_matches(&session, &form.csrf_token) {
        return Err(PageError::csrf());
    }
    let ended = state.core.store.browser_sessions().delete_for_user(&session.user.id).await?;
    state
        .core
        .store
        .audit()
        .record_implied(
            state.core.now(),
            Some(&session.user.id),
            "browser.signed_out_everywhere",
            None,
            Some(&format!("sessions={ended}")),
        )
        .await?;
    let mut response = html::see_other("/login");
    response.headers_mut().append(header::SET_COOKIE, browser::clear_cookie(&state.identity));
    Ok(response)
}
