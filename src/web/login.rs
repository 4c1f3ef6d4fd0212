//! Local sign-in and sign-out (`GET/POST /login`, `POST /logout`).
//!
//! The sign-in form is protected by a double-submit CSRF cookie ([`crate::html::csrf`]), failures are
//! throttled per (username, IP), per IP and per account ([`super::throttle`]; a device cookie
//! from [`super::device`] lets the owner through an account lock), unknown usernames cost the
//! same argon2 time as known ones, every failure says the same thing to the visitor, and each
//! is audited (`browser.sign_in_failed`, with the username tried, the address and why). Success always mints a new session
//! (session fixation) and redirects only to a local `next` ([`crate::identity::next`]).

use axum::Form;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use secrecy::{ExposeSecret, SecretString};

use super::device;
use super::pages::LoginPage;
use super::throttle::{self, Attempt};
use crate::html::{self, PageError, csrf};
use crate::identity::browser::{self, OptionalBrowserSession};
use crate::identity::next::safe_next;
use crate::identity::password::{verify_against_dummy, verify_password};
use crate::net::ClientIp;
use crate::state::AppState;
use crate::store::audit::quoted;

/// Longer inputs are refused without hashing (argon2 on megabytes is a denial of service).
const MAX_USERNAME_LEN: usize = 256;
const MAX_PASSWORD_LEN: usize = 1024;
const WRONG_CREDENTIALS: &str = "Wrong username or password.";
/// Said only after the right password: a disabled account is not a secret from its owner.
const DISABLED: &str = "This account is disabled. Ask the broker's operator to enable it.";

#[derive(Debug, Default, serde::Deserialize)]
pub struct LoginQuery {
    #[serde(default)]
    next: String,
}

#[derive(Debug, Default, serde::Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: SecretString,
    #[serde(default)]
    next: String,
    #[serde(default)]
    csrf_token: String,
}

#[derive(Debug, Default, serde::Deserialize)]
pub struct LogoutForm {
    #[serde(default)]
    csrf_token: String,
    #[serde(default)]
    next: String,
}

/// Renders the sign-in form with `status`, installing the login CSRF cookie when needed.
fn form_page(
    status: StatusCode,
    next: &str,
    username: &str,
    error: Option<&str>,
    (csrf_token, cookie): (String, Option<HeaderValue>),
) -> Response {
    let page = LoginPage {
        next: safe_next(next).to_owned(),
        csrf_token,
        username: username.chars().take(MAX_USERNAME_LEN).collect(),
        error: error.map(str::to_owned),
    };
    let mut response = html::render(status, &page);
    if let Some(cookie) = cookie {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

/// `GET /login?next=…`: the sign-in form.
pub async fn form(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<LoginQuery>, QueryRejection>,
) -> Response {
    let next = query.map(|Query(q)| q.next).unwrap_or_default();
    // [identity] mode = "oidc": the issuer signs browsers in; there is no local form.
    if state.identity.oidc.is_some() {
        return html::see_other(&crate::identity::oidc::login_path(&next));
    }
    let token = csrf::login_token(&headers, state.core.config.secure_cookies());
    form_page(StatusCode::OK, &next, "", None, token)
}

/// `POST /login`: 303 to `next` with a session cookie, or the form again (401 wrong
/// credentials, 403 CSRF, 429 throttled).
pub async fn submit(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Result<Response, PageError> {
    if state.identity.oidc.is_some() {
        return Err(PageError::not_found());
    }
    let Ok(Form(form)) = form else { return Err(PageError::bad_request()) };
    let secure = state.core.config.secure_cookies();
    // RFC 9700 §2.1 / login CSRF: the hidden field must equal the cookie.
    if !csrf::login_token_matches(&headers, secure, &form.csrf_token) {
        let message = "This sign-in form expired. Please try again.";
        return Ok(form_page(
            StatusCode::FORBIDDEN,
            &form.next,
            &form.username,
            Some(message),
            csrf::fresh_login_token(secure),
        ));
    }
    let token = (form.csrf_token.clone(), None);
    let now = state.core.now();
    let device = device::recognised(&state, &headers, &form.username);
    let attempt = Attempt { username: &form.username, ip: &ip, device: device.as_deref() };
    if let Some(refusal) = throttle::check(&state.core.store, &attempt, now).await? {
        let user_id = known_user_id(&state, &form.username).await?;
        let reason = format!("throttled:{}", refusal.budget.as_str());
        audit_failure(&state, now, user_id.as_deref(), &form.username, &ip, &reason).await?;
        let minutes = (refusal.retry_after + 59) / 60;
        let message = format!("Too many failed sign-in attempts. Try again in {minutes} minute(s).");
        let mut response = form_page(StatusCode::TOO_MANY_REQUESTS, &form.next, &form.username, Some(&message), token);
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(refusal.retry_after));
        return Ok(response);
    }
    let user = match check_credentials(&state, &form.username, form.password).await? {
        Credentials::Valid(user) => user,
        Credentials::Refused { user_id, reason } => {
            throttle::record_failure(&state.core.store, &attempt, now).await?;
            audit_failure(&state, now, user_id.as_deref(), &form.username, &ip, reason).await?;
            tracing::info!(reason, "browser sign-in failed");
            return Ok(form_page(StatusCode::UNAUTHORIZED, &form.next, &form.username, Some(WRONG_CREDENTIALS), token));
        }
    };
    throttle::record_success(&state.core.store, &attempt, now).await?;
    if user.is_disabled() {
        state
            .core
            .store
            .audit()
            .record_implied(now, Some(&user.id), "browser.sign_in_refused", None, Some("disabled"))
            .await?;
        tracing::info!(user_id = %user.id, "browser sign-in refused: the user is disabled");
        return Ok(form_page(StatusCode::FORBIDDEN, &form.next, &form.username, Some(DISABLED), token));
    }
    // Session fixation: whatever session the browser presented is ended, and a new one minted.
    if let Some(old) = browser::presented_session_hash(&state.identity, &headers) {
        state.core.store.browser_sessions().delete(&old).await?;
    }
    let (session, cookie) = browser::sign_in(&state.identity, user).await?;
    state.core.store.audit().record_implied(now, Some(&session.user.id), "browser.signed_in", None, None).await?;
    tracing::info!(user_id = %session.user.id, "browser signed in");
    let mut response = html::see_other(safe_next(&form.next));
    response.headers_mut().append(header::SET_COOKIE, cookie);
    response.headers_mut().append(header::SET_COOKIE, device::remember(&state, &form.username));
    Ok(response)
}

/// Longest username kept in an audit entry; the rest is cut (a visitor chose it).
const AUDITED_USERNAME_CHARS: usize = 64;

/// Records a failed sign-in: the username tried (quoted and bounded), the address, why — never
/// the password. `user_id` is set when the username names an account, so the owner's audit
/// trail shows the attempts on it.
async fn audit_failure(
    state: &AppState,
    now: crate::clock::Timestamp,
    user_id: Option<&str>,
    username: &str,
    ip: &str,
    reason: &str,
) -> Result<(), PageError> {
    let detail = format!("username={} address={ip} reason={reason}", quoted(username, AUDITED_USERNAME_CHARS));
    state.core.store.audit().record_implied(now, user_id, "browser.sign_in_failed", None, Some(&detail)).await?;
    Ok(())
}

/// The id of the account `username` names, if any (for the audit entry of a throttled try).
async fn known_user_id(state: &AppState, username: &str) -> Result<Option<String>, PageError> {
    if username.is_empty() || username.len() > MAX_USERNAME_LEN {
        return Ok(None);
    }
    Ok(state.core.store.users().by_username(username).await?.map(|u| u.id))
}

/// What the password check found.
enum Credentials {
    Valid(crate::store::users::User),
    /// `reason` is one of `invalid_input`, `unknown_user`, `wrong_password` (for the audit log;
    /// the visitor is told the same thing in every case).
    Refused {
        user_id: Option<String>,
        reason: &'static str,
    },
}

/// Checks the password. Runs argon2 off the async threads, and against a dummy hash when the
/// account does not exist or has no password, so timing does not tell which.
async fn check_credentials(state: &AppState, username: &str, password: SecretString) -> Result<Credentials, PageError> {
    if username.is_empty() || username.len() > MAX_USERNAME_LEN || password.expose_secret().len() > MAX_PASSWORD_LEN {
        return Ok(Credentials::Refused { user_id: None, reason: "invalid_input" });
    }
    // argon2 takes ~19 MiB and tens of milliseconds per check: bound how many run at once so a
    // flood of sign-ins (random usernames dodge the throttle) cannot exhaust memory.
    let Ok(_permit) = argon2_permits().try_acquire() else {
        return Err(PageError::busy());
    };
    let user = state.core.store.users().by_username(username).await?;
    let hash = user.as_ref().and_then(|u| u.password_hash.clone());
    let verified = tokio::task::spawn_blocking(move || match hash {
        Some(hash) => verify_password(&password, &hash),
        None => {
            verify_against_dummy(&password);
            false
        }
    })
    .await
    .map_err(PageError::internal)?;
    Ok(match user {
        Some(user) if verified => Credentials::Valid(user),
        Some(user) => Credentials::Refused { user_id: Some(user.id), reason: "wrong_password" },
        None => Credentials::Refused { user_id: None, reason: "unknown_user" },
    })
}

fn argon2_permits() -> &'static tokio::sync::Semaphore {
    static PERMITS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    PERMITS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        tokio::sync::Semaphore::new(cores * 2)
    })
}

/// `POST /logout`: ends the session (CSRF-checked) and clears the cookie; 303 to `next` or `/`.
pub async fn logout(
    State(state): State<AppState>,
    OptionalBrowserSession(session): OptionalBrowserSession,
    form: Result<Form<LogoutForm>, FormRejection>,
) -> Result<Response, PageError> {
    let form = form.map(|Form(f)| f).unwrap_or_default();
    let Some(session) = session else {
        let mut response = html::see_other(safe_next(&form.next));
        response.headers_mut().append(header::SET_COOKIE, browser::clear_cookie(&state.identity));
        return Ok(response);
    };
    if !csrf::session_token_matches(&session, &form.csrf_token) {
        return Err(PageError::csrf());
    }
    let cookie = browser::sign_out(&state.identity, &session.id_hash).await?;
    tracing::info!(user_id = %session.user.id, "browser signed out");
    let mut response = html::see_other(safe_next(&form.next));
    response.headers_mut().append(header::SET_COOKIE, cookie);
    Ok(response.into_response())
}
