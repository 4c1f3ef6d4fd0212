//! The authorization endpoint (OAuth 2.1 §4.1.1–4.1.2, RFC 7636, RFC 8707, RFC 9207).
//!
//! `GET /authorize` validates the request, sends a browser that is not signed in to
//! `/login?next=…` (back here afterwards), and shows a signed-in user the consent page: which
//! client (name and `client_id`), where approval sends the browser (the redirect URI and its
//! host), which scopes, as which user. `POST /authorize` (Approve/Deny) carries the browser
//! session's CSRF token and the request's parameters as hidden fields, which are validated again
//! from scratch — nothing in the form is trusted because it came back from our own page.
//!
//! A request whose client is unknown or whose redirect URI is not exactly one the client
//! registered gets an error page and is never redirected (RFC 6749 §4.1.2.1; no open
//! redirector). Every other problem goes back to that redirect URI with `error`, `state` and
//! `iss`. Approval stores a grant and a code (256 random bits, hashed, 60 s, single use) bound
//! to the client, redirect URI, PKCE challenge, user, scope and resource.

use std::collections::BTreeSet;
use std::sync::Arc;

use askama::Template;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::http::header::{CACHE_CONTROL, LOCATION};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use url::Url;

use super::client::{Client, ClientSource};
use super::client_metadata_document::DocumentCache;
use super::lookup::{self, LookupError};
use super::{CODE_TTL_SECS, LocalMode, redirect_uri, scopes};
use crate::broker::consent::registered_client_name;
use crate::crypto::{random_token, sha256_hex};
use crate::display::{ClientName, safe_text};
use crate::identity::browser::{BrowserSession, OptionalBrowserSession};
use crate::pkce;
use crate::state::AppState;
use crate::store::authorization_server::{NewOAuthCode, NewOAuthGrant};
use crate::token_endpoint::params::{Params, is_form};
use crate::web::csrf;
use crate::web::error::PageError;
use crate::web::pages;

/// Longer `state` values are refused (they travel in URLs and hidden fields).
const MAX_STATE_LEN: usize = 1024;

/// A request that passed every check; only this is shown or turned into a code.
#[derive(Debug)]
pub struct AuthorizeRequest {
    pub client: Client,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub code_challenge: String,
    pub scope: BTreeSet<String>,
    pub resource: String,
}

impl AuthorizeRequest {
    /// The request's parameters, as the consent form's hidden fields and for `next`.
    fn fields(&self) -> Vec<(&'static str, String)> {
        let mut fields = vec![
            ("response_type", "code".to_owned()),
            ("client_id", self.client.client_id.clone()),
            ("redirect_uri", self.redirect_uri.clone()),
            ("code_challenge", self.code_challenge.clone()),
            ("code_challenge_method", "S256".to_owned()),
            ("resource", self.resource.clone()),
        ];
        if !self.scope.is_empty() {
            fields.push(("scope", scopes::join(&self.scope)));
        }
        if let Some(state) = &self.state {
            fields.push(("state", state.clone()));
        }
        fields
    }

    /// `/authorize?…` with exactly the validated parameters (where sign-in returns to).
    fn path(&self) -> String {
        let query: String = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(self.fields()).finish();
        format!("/authorize?{query}")
    }
}

#[derive(Debug)]
enum Refusal {
    /// The client or redirect URI is not trusted: a page, no redirect.
    Page(PageError),
    /// RFC 6749 §4.1.2.1: an error sent back to the client's (verified) redirect URI.
    Redirect { redirect_uri: String, error: &'static str, description: &'static str, state: Option<String> },
}

/// What to do about a request the app built wrongly: only the app (or its developer) can fix it.
const ASK_THE_APP: &str =
    "Go back to the app that sent you here and try connecting again; if this keeps happening, tell its developer.";

fn page(message: &str) -> Refusal {
    Refusal::Page(PageError::page(
        StatusCode::BAD_REQUEST,
        "Request not valid",
        format!("The app that sent you here made a request this broker cannot accept: {message} Nothing was shared."),
        ASK_THE_APP,
    ))
}

async fn validate(state: &AppState, documents: &DocumentCache, params: &Params) -> Result<AuthorizeRequest, Refusal> {
    if params.is_duplicated("client_id") || params.is_duplicated("redirect_uri") {
        return Err(page("The request repeats client_id or redirect_uri."));
    }
    let client_id = params.get("client_id").ok_or_else(|| page("The request names no client (client_id)."))?;
    let client = match lookup::find(state, documents, client_id).await {
        Ok(client) => client,
        Err(LookupError::Unknown) => return Err(page("This client is not registered with this server.")),
        Err(LookupError::Document(error)) => {
            tracing::info!(client_id, %error, "client metadata document refused");
            return Err(Refusal::Page(PageError::page(
                StatusCode::BAD_REQUEST,
                "Client not recognised",
                format!("The app that sent you here could not be verified ({error}), so nothing was shared."),
                ASK_THE_APP,
            )));
        }
        Err(LookupError::Store(error)) => return Err(Refusal::Page(error.into())),
    };
    let redirect_uri = params.get("redirect_uri").ok_or_else(|| page("The request has no redirect_uri."))?;
    // OAuth 2.1 §2.3.1: exact string comparison with a registered URI.
    if !client.redirect_uris.iter().any(|registered| registered == redirect_uri) {
        return Err(page("The redirect_uri is not registered for this client."));
    }
    // From here on, errors go back to the verified redirect URI.
    let raw_state = params.get("state");
    let echo_state = raw_state.filter(|s| s.len() <= MAX_STATE_LEN).map(str::to_owned);
    let fail = |error, description| Refusal::Redirect {
        redirect_uri: redirect_uri.to_owned(),
        error,
        description,
        state: echo_state.clone(),
    };
    if raw_state.is_some_and(|s| s.len() > MAX_STATE_LEN) {
        return Err(fail("invalid_request", "state is longer than 1024 characters"));
    }
    if params.has_duplicates() {
        return Err(fail("invalid_request", "a parameter was sent more than once"));
    }
    match params.get("response_type") {
        Some("code") => {}
        None => return Err(fail("invalid_request", "response_type is required")),
        Some(_) => return Err(fail("unsupported_response_type", "only response_type=code is supported")),
    }
    match params.get("code_challenge_method") {
        Some("S256") => {}
        None => return Err(fail("invalid_request", "PKCE is required: code_challenge_method=S256")),
        Some(_) => return Err(fail("invalid_request", "only the S256 code_challenge_method is supported")),
    }
    let code_challenge = params
        .get("code_challenge")
        .filter(|c| pkce::is_valid_challenge(c))
        .ok_or_else(|| fail("invalid_request", "code_challenge is missing or malformed"))?;
    // RFC 8707 §2: the resource becomes the token's `aud`: the broker's MCP endpoint, or a
    // registered tool server's (`admin services add --resource`), which presents the token to
    // the token API. Compared exactly.
    let mcp_url = state.core.config.mcp_url().to_string();
    let resource = match params.get("resource") {
        None => mcp_url,
        Some(resource) if resource == mcp_url => mcp_url,
        Some(resource) => match state.core.store.services().by_resource(resource).await {
            Ok(Some(_)) => resource.to_owned(),
            Ok(None) => {
                return Err(fail(
                    "invalid_target",
                    "resource must be this server's MCP endpoint URL or a registered tool server's",
                ));
            }
            Err(error) => {
                tracing::error!(%error, "looking up a resource failed");
                return Err(fail("server_error", "the authorization server failed; try again"));
            }
        },
    };
    let scope = scopes::for_request(&state.core.config, params.get("scope"), client.scope.as_ref())
        .map_err(|_| fail("invalid_scope", "a requested scope is unknown or not allowed for this client"))?;
    Ok(AuthorizeRequest {
        redirect_uri: redirect_uri.to_owned(),
        state: echo_state,
        code_challenge: code_challenge.to_owned(),
        scope,
        resource,
        client,
    })
}

// OAuth 2.1 §4.1.1; MCP 2025-11-25 basic/authorization; MCP security best practices §Confused
// deputy (consent names the client and its redirect URI).
/// `GET /authorize`: the consent page, the sign-in redirect, or the refusal.
pub async fn show(
    _: LocalMode,
    State(state): State<AppState>,
    Extension(documents): Extension<Arc<DocumentCache>>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    RawQuery(query): RawQuery,
) -> Response {
    let params = Params::parse(query.unwrap_or_default().as_bytes());
    let request = match validate(&state, &documents, &params).await {
        Ok(request) => request,
        Err(refusal) => return refuse(&state, refusal),
    };
    match session {
        Some(session) => match connections_allowed(&state, &request, &session).await {
            Ok(already_allowed) => consent_page(&state, &request, &session, already_allowed).await,
            Err(error) => PageError::from(error).into_response(),
        },
        None => PageError::SignIn { next: request.path() }.into_response(),
    }
}

// OAuth 2.1 §4.1.2: the resource owner's decision.
/// `POST /authorize` (the request's parameters, `csrf_token`, `action=approve|deny`).
pub async fn decide(
    _: LocalMode,
    State(state): State<AppState>,
    Extension(documents): Extension<Arc<DocumentCache>>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let Ok(body) = body else { return PageError::bad_request().into_response() };
    if !is_form(&headers) {
        return PageError::bad_request().into_response();
    }
    let params = Params::parse(&body);
    let request = match validate(&state, &documents, &params).await {
        Ok(request) => request,
        Err(refusal) => return refuse(&state, refusal),
    };
    let Some(session) = session else {
        return PageError::SignIn { next: request.path() }.into_response();
    };
    // MCP security best practices §Confused deputy: consent carries CSRF protection.
    if !csrf::session_token_matches(&session, params.get("csrf_token").unwrap_or_default()) {
        tracing::warn!(client_id = %request.client.client_id, "authorization consent with a wrong CSRF token");
        return PageError::csrf().into_response();
    }
    match params.get("action") {
        Some("approve") => match approve(&state, &request, &session).await {
            Ok(response) => response,
            Err(error) => error.into_response(),
        },
        Some("deny") => {
            tracing::info!(client_id = %request.client.client_id, user_id = %session.user.id, "MCP client denied");
            let refusal = Refusal::Redirect {
                redirect_uri: request.redirect_uri.clone(),
                error: "access_denied",
                description: "the user denied the request",
                state: request.state.clone(),
            };
            refuse(&state, refusal)
        }
        _ => PageError::bad_request().into_response(),
    }
}

/// Stores the grant and a one-time code, and sends the browser back to the client with it.
async fn approve(
    state: &AppState,
    request: &AuthorizeRequest,
    session: &BrowserSession,
) -> Result<Response, PageError> {
    let now = state.core.now();
    // RFC 6749 §10.10: 256 random bits, stored only as a hash.
    let code = random_token(32);
    let code_hash = sha256_hex(&code);
    let grant_id = uuid::Uuid::new_v4().to_string();
    let scope = scopes::join(&request.scope);
    let grant = NewOAuthGrant {
        id: &grant_id,
        client_id: &request.client.client_id,
        user_id: &session.user.id,
        scope: &scope,
        resource: &request.resource,
        refresh_allowed: request.client.refresh_allowed,
    };
    let new_code = NewOAuthCode {
        code_hash: &code_hash,
        redirect_uri: &request.redirect_uri,
        code_challenge: &request.code_challenge,
        expires_at: now + CODE_TTL_SECS,
    };
    state.core.store.oauth_grants().create_with_code(&grant, &new_code, now).await?;
    state
        .core
        .store
        .audit()
        .record_implied(now, Some(&session.user.id), "oauth_client.authorized", None, Some(&request.client.client_id))
        .await?;
    tracing::info!(client_id = %request.client.client_id, user_id = %session.user.id, "MCP client authorized");
    let issuer = state.core.config.issuer();
    let mut pairs = vec![("code", code.as_str())];
    if let Some(client_state) = &request.state {
        pairs.push(("state", client_state));
    }
    pairs.push(("iss", &issuer));
    Ok(redirect_to(&request.redirect_uri, &pairs))
}

fn refuse(state: &AppState, refusal: Refusal) -> Response {
    match refusal {
        Refusal::Page(error) => error.into_response(),
        Refusal::Redirect { redirect_uri, error, description, state: client_state } => {
            let issuer = state.core.config.issuer();
            let mut pairs = vec![("error", error), ("error_description", description)];
            if let Some(s) = client_state.as_deref() {
                pairs.push(("state", s));
            }
            pairs.push(("iss", &issuer));
            redirect_to(&redirect_uri, &pairs)
        }
    }
}

/// 302 to a redirect URI that `validate` matched exactly against a registered one.
fn redirect_to(redirect_uri: &str, pairs: &[(&str, &str)]) -> Response {
    use crate::error_chain::because;
    let mut url = match Url::parse(redirect_uri) {
        Ok(url) => url,
        Err(e) => return PageError::internal(because("a registered redirect URI does not parse", e)).into_response(),
    };
    url.query_pairs_mut().extend_pairs(pairs);
    let location = match HeaderValue::from_str(url.as_str()) {
        Ok(location) => location,
        Err(e) => return PageError::internal(because("a redirect could not be built", e)).into_response(),
    };
    // The Location carries a code: never cache it.
    (StatusCode::FOUND, [(LOCATION, location), (CACHE_CONTROL, HeaderValue::from_static("no-store"))]).into_response()
}

#[derive(Debug)]
struct HiddenField {
    name: &'static str,
    value: String,
}

/// The consent page (`templates/authorize_consent.html`). Values are escaped by askama.
#[derive(Template)]
#[template(path = "authorize_consent.html")]
struct ConsentPage {
    action: String,
    client: ClientName,
    client_id: String,
    /// For metadata-document clients: the host that vouches for the name.
    document_host: Option<String>,
    redirect_uri: String,
    redirect_host: String,
    scopes: Vec<String>,
    resource: String,
    /// What the token will open: the broker's MCP server, or a named tool server.
    resource_name: String,
    username: String,
    csrf_token: String,
    hidden: Vec<HiddenField>,
    /// Connections this client id may already use: approving hands them over at once.
    already_allowed: Vec<String>,
}

/// The user's connections the token would open at once, so the page says what approving hands
/// over: for our MCP endpoint, what this client id may already use (anyone who can start a flow
/// under it inherits that); for a tool server's resource, what that tool server may already use
/// (the consents are its own, so every client holding a token for it inherits them).
async fn connections_allowed(
    state: &AppState,
    request: &AuthorizeRequest,
    session: &BrowserSession,
) -> Result<Vec<String>, crate::store::StoreError> {
    let key = if request.resource == state.core.config.mcp_url().as_str() {
        crate::identity::ClientIdentity::OAuthClient(request.client.client_id.clone()).key()
    } else {
        match state.core.store.services().by_resource(&request.resource).await? {
            Some(service) => service.client().key(),
            None => return Ok(Vec::new()),
        }
    };
    let consents = state.core.store.consents().for_user(&session.user.id).await?;
    let grants = state.core.store.grants().for_user(&session.user.id).await?;
    Ok(consents
        .iter()
        .filter(|c| c.client_key == key)
        .filter_map(|c| grants.iter().find(|g| g.id == c.grant_id))
        .map(|g| {
            let provider =
                state.core.providers.find(&g.provider).map_or(g.provider.clone(), |p| p.display_name.clone());
            match &g.account_label {
                Some(account) => format!("{provider} ({})", safe_text(account)),
                None => provider,
            }
        })
        .collect())
}

/// How the consent page names the resource a token is for.
async fn resource_name(state: &AppState, resource: &str) -> String {
    if resource == state.core.config.mcp_url().as_str() {
        return "this broker's MCP server".into();
    }
    match state.core.store.services().by_resource(resource).await {
        Ok(Some(service)) => service.client().name().to_string(),
        _ => "a tool server".into(),
    }
}

async fn consent_page(
    state: &AppState,
    request: &AuthorizeRequest,
    session: &BrowserSession,
    already_allowed: Vec<String>,
) -> Response {
    let client = &request.client;
    let page = ConsentPage {
        action: state.core.config.url("/authorize").path().to_owned(),
        client: registered_client_name(client.client_name.as_deref(), &client.client_id),
        client_id: client.client_id.clone(),
        document_host: (client.source == ClientSource::MetadataDocument)
            .then(|| redirect_uri::host_of(&client.client_id)),
        redirect_uri: request.redirect_uri.clone(),
        redirect_host: redirect_uri::host_of(&request.redirect_uri),
        scopes: request.scope.iter().cloned().collect(),
        resource: request.resource.clone(),
        resource_name: resource_name(state, &request.resource).await,
        username: safe_text(session.display_name()),
        csrf_token: session.csrf_token.clone(),
        hidden: request.fields().into_iter().map(|(name, value)| HiddenField { name, value }).collect(),
        already_allowed,
    };
    let mut response = pages::render(StatusCode::OK, &page);
    // Approving or denying answers the POST with a redirect to the client (web::security_headers).
    if let Ok(redirect) = Url::parse(&request.redirect_uri) {
        crate::web::security_headers::allow_form_redirects_to(&mut response, [&redirect]);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_consent_page_escapes_the_client_name_and_carries_the_form() {
        let page = ConsentPage {
            action: "/authorize".into(),
            client: registered_client_name(Some("<script>x</script>"), "abc"),
            client_id: "abc".into(),
            document_host: None,
            redirect_uri: "http://127.0.0.1:5/cb".into(),
            redirect_host: "127.0.0.1:5".into(),
            scopes: vec!["mcp".into()],
            resource: "http://127.0.0.1:8080/mcp".into(),
            resource_name: "this broker's MCP server".into(),
            username: "alice".into(),
            csrf_token: "tok".into(),
            hidden: vec![HiddenField { name: "state", value: "\"><b>".into() }],
            already_allowed: vec!["Demo <i>(x)</i>".into()],
        };
        let html = page.render().unwrap();
        assert!(!html.contains("<script>x"));
        assert!(!html.contains("\"><b>"));
        assert!(!html.contains("<i>(x)") && html.contains("Connections it may use at once"));
        assert!(html.contains("name=\"action\" value=\"approve\""));
        assert!(html.contains("name=\"csrf_token\" value=\"tok\""));
        assert!(html.contains("127.0.0.1:5"));
    }
}
