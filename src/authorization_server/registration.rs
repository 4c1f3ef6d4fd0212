//! `POST /register`: RFC 7591 dynamic client registration, open to anyone (MCP clients register
//! themselves), so it is bounded: 16 KiB bodies, [`MAX_PER_WINDOW`] registrations per client IP
//! per [`WINDOW_SECONDS`], and metadata checked by [`super::client::validate_metadata`].
//!
//! Public clients (`token_endpoint_auth_method: "none"`) get only a `client_id`; confidential
//! ones also get a generated 256-bit `client_secret`, returned once and stored only as its hash.
//! A registered name is self-asserted, which the consent page says.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Extension;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::LocalMode;
use super::client::{AuthMethod, ClientMetadataInput, MetadataContext, MetadataError, validate_metadata};
use super::errors::RegistrationError;
use crate::clock::Timestamp;
use crate::crypto::{random_token, sha256_hex};
use crate::oauth_server::errors::no_store;
use crate::oauth_server::params::has_content_type;
use crate::state::AppState;
use crate::store::audit::{Actor, AuditEvent};
use crate::store::oauth_clients::OAuthClientRow;
use crate::web::login::ClientIp;

/// Registrations allowed per client IP per window.
pub const MAX_PER_WINDOW: usize = 20;
pub const WINDOW_SECONDS: i64 = 10 * 60;
/// Above this many tracked addresses, stale ones are swept.
const SWEEP_ABOVE: usize = 1024;

/// Counts registrations per client IP (in memory, per instance; behind a reverse proxy every
/// client shares the proxy's address, which makes the limit global there).
#[derive(Debug, Default)]
pub struct RegistrationLimiter {
    recent: Mutex<HashMap<String, Vec<Timestamp>>>,
}

impl RegistrationLimiter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an attempt; `Err(seconds)` when the address is over its limit.
    pub fn check(&self, ip: &str, now: Timestamp) -> Result<(), i64> {
        let mut recent = self.recent.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if recent.len() > SWEEP_ABOVE {
            recent.retain(|_, times| times.iter().any(|&t| t > now - WINDOW_SECONDS));
        }
        let times = recent.entry(ip.to_owned()).or_default();
        times.retain(|&t| t > now - WINDOW_SECONDS);
        if times.len() >= MAX_PER_WINDOW {
            let oldest = times.first().copied().unwrap_or(now);
            return Err(oldest + WINDOW_SECONDS - now);
        }
        times.push(now);
        Ok(())
    }
}

// RFC 7591 §3.1 (request), §3.2.1 (201 response), §3.2.2 (errors).
pub async fn register(
    _: LocalMode,
    State(state): State<AppState>,
    Extension(limiter): Extension<Arc<RegistrationLimiter>>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match handle(&state, &limiter, &ip, &headers, body).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn handle(
    state: &AppState,
    limiter: &RegistrationLimiter,
    ip: &str,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, RegistrationError> {
    let now = state.now();
    limiter.check(ip, now).map_err(|retry_after| RegistrationError::TooMany { retry_after })?;
    // A body over the limit is refused by the extractor (413) before it is read in full.
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return Ok(rejection.into_response()),
    };
    if !has_content_type(headers, "application/json") {
        return Err(RegistrationError::InvalidClientMetadata("the body must be application/json"));
    }
    let input: ClientMetadataInput = serde_json::from_slice(&body)
        .map_err(|_| RegistrationError::InvalidClientMetadata("the body is not a JSON object of client metadata"))?;
    let metadata = validate_metadata(&input, &state.config, MetadataContext::Registration).map_err(|e| match e {
        MetadataError::InvalidRedirectUri(d) => RegistrationError::InvalidRedirectUri(d),
        MetadataError::InvalidClientMetadata(d) => RegistrationError::InvalidClientMetadata(d),
    })?;
    // 144 random bits; never contains ':' so it cannot be mistaken for a metadata-document URL.
    let client_id = random_token(18);
    let secret = (metadata.auth_method != AuthMethod::None).then(|| random_token(32));
    let row = OAuthClientRow {
        client_id: client_id.clone(),
        client_secret_hash: secret.as_deref().map(sha256_hex),
        token_endpoint_auth_method: metadata.auth_method,
        client_name: metadata.client_name.clone(),
        redirect_uris: metadata.redirect_uris.clone(),
        refresh_allowed: metadata.refresh_allowed(),
        scope: metadata.scope.clone(),
        created_at: now,
    };
    state.store.insert_oauth_client(&row).await?;
    let event = AuditEvent::new(Actor::Client(&client_id), "oauth_client.registered", None).detail(Some(&client_id));
    state.store.record(now, event).await?;
    tracing::info!(%client_id, method = metadata.auth_method.as_str(), "MCP client registered");

    let mut body = json!({
        "client_id": client_id,
        "client_id_issued_at": now,
        "redirect_uris": metadata.redirect_uris,
        "grant_types": metadata.grant_types,
        "response_types": ["code"],
        "token_endpoint_auth_method": metadata.auth_method.as_str(),
    });
    if let Some(secret) = secret {
        body["client_secret"] = secret.into();
        // RFC 7591 §3.2.1: 0 means the secret does not expire.
        body["client_secret_expires_at"] = 0.into();
    }
    if let Some(name) = metadata.client_name {
        body["client_name"] = name.into();
    }
    if let Some(scope) = metadata.scope {
        body["scope"] = scope.to_space_separated().into();
    }
    let mut response = (StatusCode::CREATED, Json(body)).into_response();
    no_store(&mut response);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_gets_its_own_window() {
        let limiter = RegistrationLimiter::new();
        for _ in 0..MAX_PER_WINDOW {
            assert!(limiter.check("a", 1_000).is_ok());
        }
        assert_eq!(limiter.check("a", 1_010), Err(WINDOW_SECONDS - 10));
        assert!(limiter.check("b", 1_010).is_ok());
        assert!(limiter.check("a", 1_000 + WINDOW_SECONDS).is_ok(), "the window slides");
    }
}
