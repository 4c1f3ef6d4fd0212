//! Client authentication at the token and revocation endpoints (RFC 6749 §2.3.1).
//!
//! The clients are the broker's own (`oauth-broker-demo`, its secret derived from the broker's
//! key) and those registered with `admin demo add-client` (one per organization that tries its
//! own app; their secrets kept as SHA-256). All are confidential: `client_secret_basic` or
//! `client_secret_post` (parsed by [`crate::token_endpoint::presented_client`], never both in
//! one request), never neither. Secrets are compared in constant time.

use secrecy::ExposeSecret;

use super::entry::CLIENT_ID as DEMO_CLIENT_ID;
use crate::crypto::constant_time_eq;
use crate::state::AppState;
use crate::token_endpoint::oauth_error::OAuthError;
use crate::token_endpoint::presented_client::PresentedClient;

/// RFC 7617 §2 realm of the `Basic` challenge sent with `invalid_client`.
pub const REALM: &str = "demo-provider";

/// Returns the authenticated client id. (Async only to fit the shared endpoint; it waits on nothing.)
pub async fn verify(state: &AppState, presented: PresentedClient) -> Result<String, OAuthError> {
    let Some(expected_secret) = &state.demo_client_secret else {
        return Err(OAuthError::InvalidClient);
    };
    // A client without a secret (`none`) is a public client, which this provider has not.
    let PresentedClient { client_id, secret: Some(secret), .. } = presented else {
        return Err(OAuthError::InvalidClient);
    };
    if client_id != DEMO_CLIENT_ID {
        let registered = state.core.store.demo().client(&client_id).await.map_err(|error| {
            tracing::error!(%error, "demo provider: reading a registered client failed");
            OAuthError::Server
        })?;
        let Some(registered) = registered else { return Err(OAuthError::InvalidClient) };
        let presented_hash = crate::crypto::sha256_hex(secret.expose_secret());
        return if constant_time_eq(presented_hash.as_bytes(), registered.secret_hash.as_bytes()) {
            Ok(client_id)
        } else {
            Err(OAuthError::InvalidClient)
        };
    }
    let secret_ok = constant_time_eq(secret.expose_secret().as_bytes(), expected_secret.expose_secret().as_bytes());
    if secret_ok { Ok(client_id) } else { Err(OAuthError::InvalidClient) }
}

/// The name of the registered client `client_id`, as the authorize page shows it; `None` for
/// a client the provider does not know.
pub async fn registered(state: &AppState, client_id: &str) -> Result<Option<String>, crate::store::StoreError> {
    if client_id == DEMO_CLIENT_ID {
        return Ok(Some("oauth-broker".to_owned()));
    }
    Ok(state.core.store.demo().client(client_id).await?.map(|c| c.name))
}
