//! The demo provider's API keys: a page where a demo account gets a key (shown once) or revokes
//! one, and the check its API makes of a key sent in `X-Demo-Key`. It plays a provider whose
//! users connect with an API key, as strictly as a real one: a key it did not issue, a revoked
//! one, or one of the wrong shape gets 401 with a reason the broker can show.
//!
//! ```text
//! GET  /keys          the page: account name → Create a key
//! POST /keys          account → a new key demo_sk_<43 url-safe characters>, only its hash stored
//! POST /keys/revoke   key → revoked (the API says so from then on)
//! /api/*              X-Demo-Key: <key> — every scope of the key's account
//! ```

use askama::Template;
use axum::Form;
use axum::extract::State;
use axum::http::header::CACHE_CONTROL;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};

use super::authorize::is_valid_account;
use crate::crypto::{random_token, sha256_hex};
use crate::state::AppState;

pub use super::entry::{KEY_HEADER, KEY_PREFIX};

#[derive(Template)]
#[template(path = "demo_keys.html")]
struct KeysPage<'a> {
    action: String,
    revoke_action: String,
    account: &'a str,
    issued: Option<String>,
    error: Option<&'a str>,
    revoked: bool,
}

#[derive(Debug, Default, serde::Deserialize)]
pub struct CreateForm {
    #[serde(default)]
    account: String,
}

#[derive(Default, serde::Deserialize)]
pub struct RevokeForm {
    #[serde(default)]
    key: String,
}

fn page(
    state: &AppState,
    status: StatusCode,
    account: &str,
    issued: Option<String>,
    error: Option<&str>,
    revoked: bool,
) -> Response {
    let page = KeysPage {
        action: state.core.config.url("/demo-provider/keys").path().to_owned(),
        revoke_action: state.core.config.url("/demo-provider/keys/revoke").path().to_owned(),
        account,
        issued,
        error,
        revoked,
    };
    match page.render() {
        Ok(html) => (status, [(CACHE_CONTROL, HeaderValue::from_static("no-store"))], Html(html)).into_response(),
        Err(error) => {
            tracing::error!(%error, "demo provider: rendering the keys page failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// `GET /demo-provider/keys`.
pub async fn show(State(state): State<AppState>) -> Response {
    page(&state, StatusCode::OK, "", None, None, false)
}

/// `POST /demo-provider/keys`: a new key for the account, shown once.
pub async fn create(State(state): State<AppState>, Form(form): Form<CreateForm>) -> Response {
    if !is_valid_account(&form.account) {
        let message = "The account name must be 1–64 letters, digits, '.', '_' or '-'.";
        return page(&state, StatusCode::BAD_REQUEST, &form.account, None, Some(message), false);
    }
    let key = format!("{KEY_PREFIX}{}", random_token(32));
    if let Err(error) = state.core.store.demo().insert_api_key(&sha256_hex(&key), &form.account, state.core.now()).await
    {
        tracing::error!(%error, "demo provider: storing a key failed");
        return page(
            &state,
            StatusCode::INTERNAL_SERVER_ERROR,
            &form.account,
            None,
            Some("The key could not be stored."),
            false,
        );
    }
    page(&state, StatusCode::OK, &form.account, Some(key), None, false)
}

/// `POST /demo-provider/keys/revoke`.
pub async fn revoke(State(state): State<AppState>, Form(form): Form<RevokeForm>) -> Response {
    match state.core.store.demo().revoke_api_key(&sha256_hex(form.key.trim()), state.core.now()).await {
        Ok(true) => page(&state, StatusCode::OK, "", None, None, true),
        Ok(false) => page(&state, StatusCode::NOT_FOUND, "", None, Some("No live key is that one."), false),
        Err(error) => {
            tracing::error!(%error, "demo provider: revoking a key failed");
            page(&state, StatusCode::INTERNAL_SERVER_ERROR, "", None, Some("The key could not be revoked."), false)
        }
    }
}

/// Why a key is refused, in the words the API answers with (never the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRefusal {
    Malformed,
    Unknown,
    Revoked,
}

impl KeyRefusal {
    pub fn describe(self) -> &'static str {
        match self {
            KeyRefusal::Malformed => "This is not a Demo Provider key: they start with demo_sk_.",
            KeyRefusal::Unknown => "No such key: it was never issued by the Demo Provider.",
            KeyRefusal::Revoked => "This key was revoked; create a new one on the Demo Provider's keys page.",
        }
    }
}

/// The account of the key in `headers`, if one was sent: `None` when there is no key header,
/// `Some(Err)` when there is one the provider refuses.
pub async fn account_for_key(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<Option<Result<String, KeyRefusal>>, crate::store::StoreError> {
    let mut values = headers.get_all(KEY_HEADER).iter();
    let Some(value) = values.next() else { return Ok(None) };
    if values.next().is_some() {
        return Ok(Some(Err(KeyRefusal::Malformed)));
    }
    let Some(key) = value.to_str().ok().map(str::trim).filter(|k| k.starts_with(KEY_PREFIX)) else {
        return Ok(Some(Err(KeyRefusal::Malformed)));
    };
    Ok(Some(match state.core.store.demo().api_key(&sha256_hex(key)).await? {
        None => Err(KeyRefusal::Unknown),
        Some(row) if row.revoked_at.is_some() => Err(KeyRefusal::Revoked),
        Some(row) => Ok(row.account),
    }))
}
