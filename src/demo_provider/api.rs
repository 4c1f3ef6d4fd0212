//! The demo provider's protected API (RFC 6750): a profile, notes, and an echo endpoint that
//! shows what the broker forwarded. An API key in `X-Demo-Key` ([`super::keys`]) works too. The access token is accepted only in the `Authorization`
//! header; one in the query string is refused (§2.3 would leak it into logs and histories).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{OriginalUri, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::{Extension, Json};
use serde_json::{Value, json};

use super::api_error::ApiError;
use super::token_cache::{LiveToken, TokenCache};
use crate::crypto::sha256_hex;
use crate::domain::demo_scopes::{DemoScope, ScopeSet};
use crate::state::AppState;
use crate::store::demo::{DemoNoteRow, DemoTokenKind};

const MAX_NOTE_CHARS: usize = 1000;

/// Who an access token speaks for, once verified.
#[derive(Debug)]
struct Caller {
    account: String,
    scopes: ScopeSet,
}

impl Caller {
    fn require(&self, scope: DemoScope) -> Result<(), ApiError> {
        if self.scopes.contains(scope) { Ok(()) } else { Err(ApiError::InsufficientScope(scope)) }
    }
}

// RFC 6750 §2.1 (header only), §3.1 (errors).
async fn authenticate(
    state: &AppState,
    cache: &TokenCache,
    headers: &HeaderMap,
    uri: &Uri,
) -> Result<Caller, ApiError> {
    if uri.query().is_some_and(|q| url::form_urlencoded::parse(q.as_bytes()).any(|(k, _)| k == "access_token")) {
        return Err(ApiError::InvalidRequest("access tokens are accepted only in the Authorization header"));
    }
    // An API key (the provider's key mode, `keys.rs`): every scope of its account.
    if let Some(keyed) = super::keys::account_for_key(state, headers).await? {
        if headers.contains_key(AUTHORIZATION) {
            return Err(ApiError::InvalidRequest("send either an access token or an API key, not both"));
        }
        let account = keyed.map_err(|refusal| ApiError::InvalidKey(refusal.describe()))?;
        return Ok(Caller { account, scopes: ScopeSet::all() });
    }
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(ApiError::InvalidToken);
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty())
        .ok_or(ApiError::InvalidToken)?;
    let live = live_token(state, cache, &sha256_hex(token)).await?.ok_or(ApiError::InvalidToken)?;
    // Checked on every use, cached or not: a kept token still expires.
    if live.expires_at <= state.core.now() {
        return Err(ApiError::InvalidToken);
    }
    Ok(Caller { scopes: live.scopes.clone(), account: live.account.clone() })
}

/// The live (unrevoked) access token with this hash, from the cache while the store's
/// generation stands still, else from the database (and kept if the generation did not move
/// during the read).
async fn live_token(
    state: &AppState,
    cache: &TokenCache,
    token_hash: &str,
) -> Result<Option<Arc<LiveToken>>, ApiError> {
    let generation = state.core.store.cache_shared_generation();
    if let Some(kept) = generation.and_then(|g| cache.get(g, token_hash)) {
        return Ok(Some(kept));
    }
    let Some(row) = state
        .core
        .store
        .demo()
        .token(token_hash)
        .await?
        .filter(|row| row.kind == DemoTokenKind::Access && row.revoked_at.is_none())
    else {
        return Ok(None);
    };
    let live = Arc::new(LiveToken { account: row.account, scopes: row.scopes, expires_at: row.expires_at });
    if let Some(generation) = generation {
        cache.insert(generation, state.core.store.cache_shared_generation(), token_hash, live.clone());
    }
    Ok(Some(live))
}

// GET api/me — needs `profile`.
pub async fn me(
    State(state): State<AppState>,
    Extension(cache): Extension<Arc<TokenCache>>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Json<Value>, ApiError> {
    let caller = authenticate(&state, &cache, &headers, &uri).await?;
    caller.require(DemoScope::Profile)?;
    let scopes: Vec<&str> = caller.scopes.iter().map(DemoScope::as_str).collect();
    Ok(Json(json!({ "account": caller.account, "scopes": scopes })))
}

// GET api/notes — needs `notes:read`.
pub async fn list_notes(
    State(state): State<AppState>,
    Extension(cache): Extension<Arc<TokenCache>>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Json<Value>, ApiError> {
    let caller = authenticate(&state, &cache, &headers, &uri).await?;
    caller.require(DemoScope::NotesRead)?;
    let notes = state.core.store.demo().notes(&caller.account).await?;
    Ok(Json(json!({ "notes": notes })))
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NewNote {
    text: String,
}

// POST api/notes — needs `notes:write`; body `{"text": "…"}`, 1–1000 characters.
pub async fn create_note(
    State(state): State<AppState>,
    Extension(cache): Extension<Arc<TokenCache>>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Result<(StatusCode, Json<DemoNoteRow>), ApiError> {
    let caller = authenticate(&state, &cache, &headers, &uri).await?;
    caller.require(DemoScope::NotesWrite)?;
    let is_json = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(ApiError::InvalidRequest("the body must be application/json"));
    }
    let note: NewNote = serde_json::from_slice(&body)
        .map_err(|_| ApiError::InvalidRequest("the body must be a JSON object with one text field"))?;
    if !(1..=MAX_NOTE_CHARS).contains(&note.text.chars().count()) {
        return Err(ApiError::InvalidRequest("text must be 1-1000 characters"));
    }
    let row = state.core.store.demo().insert_note(&caller.account, &note.text, state.core.now()).await?;
    Ok((StatusCode::CREATED, Json(row)))
}

// Any method on api/echo[/…] — needs any valid access token. Shows what arrived, so tests can
// check the broker forwards method, path, query, `x-demo-*` headers and body faithfully.
pub async fn echo(
    State(state): State<AppState>,
    Extension(cache): Extension<Arc<TokenCache>>,
    method: Method,
    OriginalUri(original): OriginalUri,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let caller = authenticate(&state, &cache, &headers, &uri).await?;
    let mut demo_headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in &headers {
        if name.as_str().starts_with("x-demo-") {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            demo_headers
                .entry(name.as_str().to_owned())
                .and_modify(|existing| {
                    existing.push_str(", ");
                    existing.push_str(&value);
                })
                .or_insert(value);
        }
    }
    Ok(Json(json!({
        "method": method.as_str(),
        "path": original.path(),
        "query": original.query(),
        "headers": demo_headers,
        "body": String::from_utf8_lossy(&body),
        "account": caller.account,
    })))
}

/// Slow calls whose caller went away before the answer (the handler future was dropped).
static SLOW_ABANDONED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many `api/slow` calls were abandoned by their caller (for cancellation tests).
pub fn slow_calls_abandoned() -> usize {
    SLOW_ABANDONED.load(std::sync::atomic::Ordering::SeqCst)
}

#[derive(serde::Deserialize)]
pub struct SlowQuery {
    #[serde(default)]
    seconds: u64,
}

// GET api/slow?seconds=N (at most 30): answers after N seconds. Lets a demo user (and the
// tests) see that cancelling a tool call also cancels the request upstream.
pub async fn slow(
    State(state): State<AppState>,
    Extension(cache): Extension<Arc<TokenCache>>,
    uri: Uri,
    headers: HeaderMap,
    axum::extract::Query(query): axum::extract::Query<SlowQuery>,
) -> Result<Json<Value>, ApiError> {
    let caller = authenticate(&state, &cache, &headers, &uri).await?;
    struct Abandoned(bool);
    impl Drop for Abandoned {
        fn drop(&mut self) {
            if self.0 {
                SLOW_ABANDONED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    }
    let mut guard = Abandoned(true);
    tokio::time::sleep(std::time::Duration::from_secs(query.seconds.min(30))).await;
    guard.0 = false;
    Ok(Json(json!({ "slept": query.seconds.min(30), "account": caller.account })))
}
