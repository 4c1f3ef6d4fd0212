//! `POST /register`: RFC 7591 dynamic client registration, open to anyone (MCP clients register
//! themselves), so it is bounded: 16 KiB bodies, [`MAX_PER_WINDOW`] registrations per client IP
//! per [`WINDOW_SECONDS`], and metadata checked by [`super::client::validate_metadata`].
//!
//! Public clients (`token_endpoint_auth_method: "none"`) get only a `client_id`; confidential
//! ones also get a generated 256-bit `client_secret`, returned once and stored only as its hash.
//! A registered name is self-asserted, which the consent page says.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::client::{AuthMethod, ClientMetadataInput, MetadataContext, MetadataError, validate_metadata};
use super::local_mode::LocalMode;
use super::registration_error::RegistrationError;
use crate::clock::Timestamp;
use crate::crypto::{random_token, sha256_hex};
use crate::net::ClientIp;
use crate::state::AppState;
use crate::store::Store;
use crate::store::audit::{Actor, AuditEvent};
use crate::store::authorization_server::OAuthClientRow;
use crate::token_endpoint::oauth_error::no_store;
use crate::token_endpoint::params::has_content_type;

/// Registrations allowed per client IP per window.
pub const MAX_PER_WINDOW: i64 = 20;
pub const WINDOW_SECONDS: i64 = crate::store::throttle::LONGEST_WINDOW_SECONDS;

/// Takes one registration from `ip`'s budget, or says how many seconds until one frees up.
/// The attempts are counted in the database (`throttle_failures`, bucket `register` + address),
/// so every instance on one database shares the budget; `ip` is the client address
/// as [`ClientIp`] resolves it, through the configured trusted proxies.
pub async fn take_budget(store: &Store, ip: &str, now: Timestamp) -> Result<(), RegistrationError> {
    let bucket = format!("register\n{ip}");
    match store.throttle().take(&bucket, now, now - WINDOW_SECONDS, MAX_PER_WINDOW).await? {
        Ok(()) => Ok(()),
        Err(oldest) => Err(RegistrationError::TooMany { retry_after: (oldest + WINDOW_SECONDS - now).max(1) }),
    }
}

// RFC 7591 §3.1 (request), §3.2.1 (201 response), §3.2.2 (errors).
pub async fn register(
    _: LocalMode,
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match handle(&state, &ip, &headers, body).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn handle(
    state: &AppState,
    ip: &str,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, RegistrationError> {
    let now = state.core.now();
    take_budget(&state.core.store, ip, now).await?;
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
    let metadata =
        validate_metadata(&input, &state.core.config, MetadataContext::Registration).map_err(|e| match e {
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
    state.core.store.oauth_clients().insert(&row).await?;
    let event = AuditEvent::new(Actor::Client(&client_id), "oauth_client.registered", None).detail(Some(&client_id));
    state.core.store.audit().record(now, event).await?;
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

    async fn store() -> (Store, tempfile::TempDir) {
        let (dir, store) = crate::store::migrated_for_tests().await;
        (store, dir)
    }

    fn refused_for(result: Result<(), RegistrationError>) -> Option<i64> {
        match result {
            Ok(()) => None,
            Err(RegistrationError::TooMany { retry_after }) => Some(retry_after),
            Err(other) => panic!("unexpected refusal: {other:?}"),
        }
    }

    #[tokio::test]
    async fn each_address_gets_its_own_window_in_the_database() {
        let (store, _dir) = store().await;
        for _ in 0..MAX_PER_WINDOW {
            assert_eq!(refused_for(take_budget(&store, "a", 1_000).await), None);
        }
        assert_eq!(refused_for(take_budget(&store, "a", 1_010).await), Some(WINDOW_SECONDS - 10));
        assert_eq!(refused_for(take_budget(&store, "b", 1_010).await), None, "another address has its own budget");
        assert_eq!(refused_for(take_budget(&store, "a", 1_000 + WINDOW_SECONDS).await), None, "the window slides");
    }

    #[tokio::test]
    async fn a_refused_attempt_does_not_extend_the_wait() {
        let (store, _dir) = store().await;
        for _ in 0..MAX_PER_WINDOW {
            take_budget(&store, "a", 1_000).await.unwrap();
        }
        for later in [1_100, 1_200, 1_300] {
            assert_eq!(refused_for(take_budget(&store, "a", later).await), Some(1_000 + WINDOW_SECONDS - later));
        }
    }

    #[tokio::test]
    async fn a_sign_in_sweep_keeps_the_registration_attempts_still_counted() {
        let (store, _dir) = store().await;
        for _ in 0..MAX_PER_WINDOW {
            take_budget(&store, "a", 1_000).await.unwrap();
        }
        // The sign-in throttle sweeps as it goes; six minutes on, registrations still count.
        let now = 1_000 + 6 * 60;
        store.throttle().sweep(now - crate::web::throttle::WINDOW_SECONDS.max(WINDOW_SECONDS), now, now).await.unwrap();
        assert!(refused_for(take_budget(&store, "a", now).await).is_some());
    }
}
