//! Client authentication at the token and revocation endpoints (RFC 6749 §2.3.1).
//!
//! Only one confidential client exists here: `client_secret_basic` or `client_secret_post`
//! (parsed by [`crate::token_endpoint::presented_client`], never both in one request), never neither.
//! The id and secret are compared in constant time.

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
    // Both comparisons always run, so timing does not reveal which one failed.
    let id_ok = constant_time_eq(client_id.as_bytes(), DEMO_CLIENT_ID.as_bytes());
    let secret_ok = constant_time_eq(secret.expose_secret().as_bytes(), expected_secret.expose_secret().as_bytes());
    if id_ok & secret_ok { Ok(client_id) } else { Err(OAuthError::InvalidClient) }
}
