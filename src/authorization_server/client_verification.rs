//! Client authentication at the token and revocation endpoints (RFC 6749 §2.3, OAuth 2.1 §2.4),
//! per the method the client registered: public clients (`none`, and every metadata-document
//! client) send `client_id` alone; confidential clients send their secret with HTTP Basic
//! (`client_secret_basic`) or in the body (`client_secret_post`) — the registered method only.
//! The credentials are parsed by [`crate::token_endpoint::presented_client`]; this is the look-up.
//! Secrets are compared as SHA-256 hashes in constant time.

use secrecy::ExposeSecret;

use super::client::Client;
use super::client_metadata_document::is_document_client_id;
use crate::crypto::{constant_time_eq, sha256_hex};
use crate::state::AppState;
use crate::token_endpoint::oauth_error::OAuthError;
use crate::token_endpoint::presented_client::{AuthMethod, PresentedClient};

/// RFC 7617 §2 realm of the `Basic` challenge sent with `invalid_client`.
pub const REALM: &str = "oauth-broker";

/// Returns the authenticated client's id.
pub async fn verify(state: &AppState, presented: PresentedClient) -> Result<String, OAuthError> {
    let PresentedClient { client_id, method, secret } = presented;
    // A metadata-document client is public by construction and is not fetched again here: the
    // code or refresh token it presents is bound to its client_id, which is all that is checked.
    if is_document_client_id(&client_id) {
        return if method == AuthMethod::None { Ok(client_id) } else { Err(OAuthError::InvalidClient) };
    }
    let client = Client::registered(state, &client_id).await?.ok_or(OAuthError::InvalidClient)?;
    if client.auth_method != method {
        return Err(OAuthError::InvalidClient);
    }
    match (secret, client.secret_hash.as_deref()) {
        (None, _) if method == AuthMethod::None => Ok(client_id),
        (Some(secret), Some(expected)) => {
            let presented = sha256_hex(secret.expose_secret());
            if constant_time_eq(presented.as_bytes(), expected.as_bytes()) {
                Ok(client_id)
            } else {
                Err(OAuthError::InvalidClient)
            }
        }
        _ => Err(OAuthError::InvalidClient),
    }
}
