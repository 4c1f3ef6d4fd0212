//! Client authentication at the token endpoint (RFC 6749 §2.3, OAuth 2.1 §2.4), per the method
//! the client registered: public clients (`none`, and every metadata-document client) send
//! `client_id` alone; confidential clients send their secret with HTTP Basic
//! (`client_secret_basic`) or in the body (`client_secret_post`) — the registered method only,
//! never two methods at once. Secrets are compared as SHA-256 hashes in constant time.

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use secrecy::{ExposeSecret, SecretString};

use super::client::{AuthMethod, Client};
use super::client_metadata_document::is_document_client_id;
use super::errors::OAuthError;
use super::params::{Params, decode_form_component};
use crate::crypto::{constant_time_eq, sha256_hex};
use crate::state::AppState;

/// Returns the authenticated client's id.
pub async fn authenticate(state: &AppState, headers: &HeaderMap, params: &Params) -> Result<String, OAuthError> {
    if params.is_duplicated("client_id") || params.is_duplicated("client_secret") {
        return Err(OAuthError::InvalidRequest("repeated client credentials"));
    }
    let basic = match headers.get_all(AUTHORIZATION).iter().count() {
        0 => None,
        1 => Some(headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(parse_basic)),
        _ => return Err(OAuthError::InvalidRequest("repeated Authorization header")),
    };
    let (client_id, secret, method) = match (basic, params.get("client_secret")) {
        (Some(_), Some(_)) => return Err(OAuthError::InvalidRequest("more than one client authentication method")),
        // An Authorization header that is not valid Basic is a failed authentication attempt.
        (Some(None), None) => return Err(OAuthError::InvalidClient),
        (Some(Some((id, secret))), None) => {
            // A client_id in the body may accompany Basic, but must name the same client.
            if params.get("client_id").is_some_and(|body_id| body_id != id) {
                return Err(OAuthError::InvalidClient);
            }
            (id, Some(secret), AuthMethod::ClientSecretBasic)
        }
        (None, Some(secret)) => {
            let id = params.get("client_id").ok_or(OAuthError::InvalidClient)?;
            (id.to_owned(), Some(SecretString::from(secret.to_owned())), AuthMethod::ClientSecretPost)
        }
        (None, None) => {
            let id = params.get("client_id").ok_or(OAuthError::InvalidClient)?;
            (id.to_owned(), None, AuthMethod::None)
        }
    };
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

/// Parses `Basic base64(urlencode(id) ":" urlencode(secret))` (RFC 6749 §2.3.1, RFC 7617).
fn parse_basic(header: &str) -> Option<(String, SecretString)> {
    let (scheme, credentials) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(STANDARD.decode(credentials.trim()).ok()?).ok()?;
    let (id, secret) = decoded.split_once(':')?;
    let id = decode_form_component(id)?;
    let secret = decode_form_component(secret)?;
    if id.is_empty() {
        return None;
    }
    Some((id, SecretString::from(secret)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(raw: &str) -> String {
        format!("Basic {}", STANDARD.encode(raw))
    }

    #[test]
    fn basic_credentials_are_form_decoded_after_base64() {
        let (id, secret) = parse_basic(&basic("client%3A1:s%3Ae+cret")).unwrap();
        assert_eq!(id, "client:1");
        assert_eq!(secret.expose_secret(), "s:e cret");
        for bad in ["Bearer abc", "Basic !!!", &basic("no-colon"), &basic(":secret"), &basic("id:%zz")] {
            assert!(parse_basic(bad).is_none(), "{bad}");
        }
    }
}
