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
//! `iss`. Approval stores a delegation (the user's approval of the client, which its codes and
//! refresh tokens hang off) and a code (256 random bits, hashed, 60 s, single use) bound to the
//! client, redirect URI, PKCE challenge, user, scope and resource. The checks are
//! [`super::authorize_request`]'s, the page [`super::authorize_consent`]'s.

use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::http::header::{CACHE_CONTROL, LOCATION};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use url::Url;

use super::authorize_consent::{connections_allowed, consent_page};
use super::authorize_request::{AuthorizeRequest, Refusal, validate};
use super::client_metadata_document::DocumentCache;
use super::local_mode::LocalMode;
use super::scopes;
use crate::crypto::{random_token, sha256_hex};
use crate::html::{PageError, csrf};
use crate::identity::browser::{BrowserSession, OptionalBrowserSession};
use crate::state::AppState;
use crate::store::authorization_server::{NewOAuthCode, NewOAuthGrant};
use crate::token_endpoint::params::{Params, is_form};

/// RFC 6749 §4.1.2 recommends at most 10 minutes; a short life makes replays obvious.
pub const CODE_TTL_SECS: i64 = 60;
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

/// Stores the delegation and a one-time code, and sends the browser back to the client with it.
async fn approve(
    state: &AppState,
    request: &AuthorizeRequest,
    session: &BrowserSession,
) -> Result<Response, PageError> {
    let now = state.core.now();
    // RFC 6749 §10.10: 256 random bits, stored only as a hash.
    let code = random_token(32);
    let code_hash = sha256_hex(&code);
    let delegation_id = uuid::Uuid::new_v4().to_string();
    let scope = scopes::join(&request.scope);
    let delegation = NewOAuthGrant {
        id: &delegation_id,
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
    state.core.store.oauth_grants().create_with_code(&delegation, &new_code, now).await?;
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
