//! The authorization endpoint: `GET /authorize` validates and shows the approve page, `POST
//! /authorize` re-validates and answers with a code or `access_denied`.
//!
//! A request whose client or redirect URI cannot be trusted gets an error page and is never
//! redirected (RFC 6749 §4.1.2.1; no open redirector). Every other problem is reported to the
//! registered redirect URI with `state` echoed and `iss` set (RFC 9207).
//!
//! CSRF: there is no session to bind a token to, so the POST is re-validated from scratch
//! (client, exact redirect URI, PKCE challenge, scopes, state) and a browser's cross-site POST
//! is refused by `Sec-Fetch-Site`. A forged approval could only send a code to the broker's own
//! callback under a `state` the broker did not issue to that browser, which the broker rejects.
//! Framing is denied by the global security headers, so the buttons cannot be clickjacked.

use askama::Template;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::header::{CACHE_CONTROL, LOCATION};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use url::Url;

use super::metadata::issuer;
use crate::crypto::{random_token, sha256_hex};
use crate::domain::demo_scopes::ScopeSet;
use crate::html::render;
use crate::pkce;
use crate::state::AppState;
use crate::store::demo::DemoCodeRow;
use crate::token_endpoint::params::{Params, is_form};

/// RFC 6749 §4.1.2 recommends at most 10 minutes; a short life makes replays obvious.
pub const CODE_TTL_SECS: i64 = 60;

const DEFAULT_ACCOUNT: &str = "demo-user";
const MAX_STATE_LEN: usize = 1024;

/// A request that passed every check; only this is ever shown or turned into a code.
#[derive(Debug)]
struct AuthorizeRequest {
    client_id: String,
    /// The registered client's name, as the page shows it.
    client_name: String,
    redirect_uri: String,
    scopes: ScopeSet,
    state: String,
    code_challenge: String,
}

#[derive(Debug)]
enum Refusal {
    /// The client or redirect URI is not trusted: a 400 page, no redirect.
    Page(&'static str),
    /// RFC 6749 §4.1.2.1: an error sent back to the (already verified) redirect URI.
    Redirect { redirect_uri: String, error: &'static str, description: &'static str, state: Option<String> },
}

// RFC 6749 §4.1.1, OAuth 2.1 §4.1.1, RFC 7636 §4.3.
pub async fn show(State(state): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let params = Params::parse(query.unwrap_or_default().as_bytes());
    match validate(&state, &params).await {
        Ok(request) => approve_page(&state, &request, DEFAULT_ACCOUNT, None, StatusCode::OK),
        Err(refusal) => refuse(&state, refusal),
    }
}

// RFC 6749 §4.1.2: the resource owner's decision.
pub async fn decide(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if fetch_site.is_some_and(|site| site != "same-origin" && site != "none") {
        return error_page(StatusCode::FORBIDDEN, "This form must be submitted from the Demo Provider's own page.");
    }
    if !is_form(&headers) {
        return error_page(StatusCode::BAD_REQUEST, "The form was not submitted as a form.");
    }
    let params = Params::parse(&body);
    let request = match validate(&state, &params).await {
        Ok(request) => request,
        Err(refusal) => return refuse(&state, refusal),
    };
    let redirect = |error, description| Refusal::Redirect {
        redirect_uri: request.redirect_uri.clone(),
        error,
        description,
        state: Some(request.state.clone()),
    };
    match params.get("decision") {
        Some("approve") => {}
        Some("deny") => return refuse(&state, redirect("access_denied", "the resource owner denied the request")),
        _ => return refuse(&state, redirect("invalid_request", "missing decision")),
    }
    let account = params.get("account").unwrap_or_default();
    if !is_valid_account(account) {
        let message = "The account name must be 1–64 letters, digits, '.', '_' or '-'.";
        return approve_page(&state, &request, account, Some(message), StatusCode::BAD_REQUEST);
    }
    match issue_code(&state, &request, account).await {
        Ok(code) => {
            let issuer = issuer(&state);
            redirect_to(&request.redirect_uri, &[("code", &code), ("state", &request.state), ("iss", &issuer)])
        }
        Err(error) => {
            tracing::error!(%error, "demo provider: storing an authorization code failed");
            error_page(StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong. Please try again.")
        }
    }
}

async fn validate(state: &AppState, params: &Params) -> Result<AuthorizeRequest, Refusal> {
    let client_id = params.get("client_id").ok_or(Refusal::Page("The request names no client (client_id)."))?;
    let client_name = match super::demo_client::registered(state, client_id).await {
        Ok(Some(name)) => name,
        Ok(None) => return Err(Refusal::Page("The client_id is not registered with the Demo Provider.")),
        Err(error) => {
            tracing::error!(%error, "demo provider: reading a registered client failed");
            return Err(Refusal::Page("Something went wrong. Please try again."));
        }
    };
    let redirect_uri = params.get("redirect_uri").ok_or(Refusal::Page("The request has no redirect_uri."))?;
    // OAuth 2.1 §2.3.1 / §4.1.3: exact string comparison, no prefix or normalisation. The
    // broker's registered URIs: its callback for this provider, and the older shared one.
    let registered =
        [state.core.config.provider_redirect_uri(&crate::domain::ProviderId::demo()), state.core.config.redirect_uri()];
    if !registered.iter().any(|uri| uri.as_str() == redirect_uri) {
        return Err(Refusal::Page("The redirect_uri is not registered for this client."));
    }
    // From here on errors go back to the verified redirect URI.
    let echo_state = params.get("state").filter(|s| s.len() <= MAX_STATE_LEN).map(str::to_owned);
    let fail = |error, description| Refusal::Redirect {
        redirect_uri: redirect_uri.to_owned(),
        error,
        description,
        state: echo_state.clone(),
    };
    let Some(request_state) = echo_state.clone() else {
        return Err(fail("invalid_request", "state is required (at most 1024 characters, sent once)"));
    };
    match params.get("response_type") {
        Some("code") => {}
        None => return Err(fail("invalid_request", "response_type is required")),
        Some(_) => return Err(fail("unsupported_response_type", "only response_type=code is supported")),
    }
    if params.has_duplicates() {
        return Err(fail("invalid_request", "a parameter was sent more than once"));
    }
    match params.get("code_challenge_method") {
        Some("S256") => {}
        None => return Err(fail("invalid_request", "code_challenge_method=S256 is required")),
        Some(_) => return Err(fail("invalid_request", "only the S256 code_challenge_method is supported")),
    }
    let code_challenge = params
        .get("code_challenge")
        .filter(|c| pkce::is_valid_challenge(c))
        .ok_or_else(|| fail("invalid_request", "code_challenge is missing or malformed"))?;
    let scopes = ScopeSet::parse_requested(params.get("scope"))
        .map_err(|_| fail("invalid_scope", "unknown scope; supported: profile notes:read notes:write"))?;
    Ok(AuthorizeRequest {
        client_id: client_id.to_owned(),
        client_name,
        redirect_uri: redirect_uri.to_owned(),
        scopes,
        state: request_state,
        code_challenge: code_challenge.to_owned(),
    })
}

/// 1–64 characters of `[A-Za-z0-9._-]`.
pub(super) fn is_valid_account(account: &str) -> bool {
    (1..=64).contains(&account.len())
        && account.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// RFC 6749 §4.1.2 / §10.10: 256 random bits, stored only as a hash, valid 60 s, single use.
async fn issue_code(
    state: &AppState,
    request: &AuthorizeRequest,
    account: &str,
) -> Result<String, crate::store::StoreError> {
    let code = random_token(32);
    let row = DemoCodeRow {
        code_hash: sha256_hex(&code),
        client_id: request.client_id.clone(),
        redirect_uri: request.redirect_uri.clone(),
        scopes: request.scopes.clone(),
        account: account.to_owned(),
        code_challenge: request.code_challenge.clone(),
        expires_at: state.core.now() + CODE_TTL_SECS,
        used_at: None,
    };
    state.core.store.demo().insert_code(&row).await?;
    Ok(code)
}

fn refuse(state: &AppState, refusal: Refusal) -> Response {
    match refusal {
        Refusal::Page(message) => error_page(StatusCode::BAD_REQUEST, message),
        Refusal::Redirect { redirect_uri, error, description, state: request_state } => {
            let issuer = issuer(state);
            let mut pairs = vec![("error", error), ("error_description", description)];
            if let Some(s) = request_state.as_deref() {
                pairs.push(("state", s));
            }
            pairs.push(("iss", &issuer));
            redirect_to(&redirect_uri, &pairs)
        }
    }
}

/// 302 to a redirect URI that `validate` already matched exactly against the registered one.
fn redirect_to(redirect_uri: &str, pairs: &[(&str, &str)]) -> Response {
    let Ok(mut url) = Url::parse(redirect_uri) else {
        return error_page(StatusCode::INTERNAL_SERVER_ERROR, "The registered redirect URI is invalid.");
    };
    url.query_pairs_mut().extend_pairs(pairs);
    let Ok(location) = HeaderValue::from_str(url.as_str()) else {
        return error_page(StatusCode::INTERNAL_SERVER_ERROR, "The redirect could not be built.");
    };
    // The Location carries a code: never cache it.
    let headers = [(LOCATION, location), (CACHE_CONTROL, HeaderValue::from_static("no-store"))];
    (StatusCode::FOUND, headers).into_response()
}

#[derive(Debug)]
struct ScopeView {
    name: &'static str,
    description: &'static str,
}

#[derive(Debug)]
struct HiddenField {
    name: &'static str,
    value: String,
}

#[derive(Template)]
#[template(path = "demo_authorize.html")]
struct AuthorizePage<'a> {
    /// Set when the request is refused outright; the rest is then unused.
    fatal: Option<&'a str>,
    action: String,
    client_name: &'a str,
    scopes: Vec<ScopeView>,
    hidden: Vec<HiddenField>,
    account: &'a str,
    account_error: Option<&'a str>,
}

fn approve_page(
    state: &AppState,
    request: &AuthorizeRequest,
    account: &str,
    account_error: Option<&str>,
    status: StatusCode,
) -> Response {
    let hidden = [
        ("response_type", "code".to_owned()),
        ("client_id", request.client_id.clone()),
        ("redirect_uri", request.redirect_uri.clone()),
        ("scope", request.scopes.to_space_separated()),
        ("state", request.state.clone()),
        ("code_challenge", request.code_challenge.clone()),
        ("code_challenge_method", "S256".to_owned()),
    ]
    .into_iter()
    .map(|(name, value)| HiddenField { name, value })
    .collect();
    let page = AuthorizePage {
        fatal: None,
        action: state.core.config.url("/demo-provider/authorize").path().to_owned(),
        client_name: &request.client_name,
        scopes: request.scopes.iter().map(|s| ScopeView { name: s.as_str(), description: s.describe() }).collect(),
        hidden,
        account,
        account_error,
    };
    let mut response = render(status, &page);
    // The decision is answered with a redirect to the broker's callback, which is this origin
    // only while the browser uses the public URL (`crate::html::security_headers`).
    if let Ok(redirect) = url::Url::parse(&request.redirect_uri) {
        crate::html::security_headers::allow_form_redirects_to(&mut response, [&redirect]);
    }
    response
}

fn error_page(status: StatusCode, message: &str) -> Response {
    let page = AuthorizePage {
        fatal: Some(message),
        action: String::new(),
        client_name: "",
        scopes: Vec::new(),
        hidden: Vec::new(),
        account: "",
        account_error: None,
    };
    render(status, &page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_names_are_short_slugs() {
        assert!(is_valid_account("demo-user"));
        assert!(is_valid_account("A.b_c-9"));
        assert!(is_valid_account(&"a".repeat(64)));
        for bad in ["", "a b", "<script>", "é", &"a".repeat(65)] {
            assert!(!is_valid_account(bad), "{bad:?} should be refused");
        }
    }

    #[test]
    fn the_approve_page_escapes_what_it_echoes() {
        let page = AuthorizePage {
            fatal: None,
            action: "/demo-provider/authorize".into(),
            client_name: "",
            scopes: vec![ScopeView { name: "profile", description: "See your account name" }],
            hidden: vec![HiddenField { name: "state", value: "\"><script>x</script>".into() }],
            account: "<b>",
            account_error: None,
        };
        let html = page.render().unwrap();
        assert!(!html.contains("<script>x"));
        assert!(!html.contains("<b>"));
        assert!(html.contains("name=\"decision\" value=\"approve\""));
        assert!(html.contains("action=\"/demo-provider/authorize\""));
    }
}
