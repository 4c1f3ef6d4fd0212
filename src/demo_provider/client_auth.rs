//! Client authentication at the token and revocation endpoints (RFC 6749 §2.3.1).
//!
//! Only confidential clients exist here: `client_secret_basic` or `client_secret_post`, never
//! both in one request (§2.3), never neither. The secret is compared in constant time.

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use secrecy::{ExposeSecret, SecretString};

use super::errors::OAuthError;
use super::params::{Params, decode_form_component};
use crate::crypto::constant_time_eq;
use crate::oauth::providers::DEMO_CLIENT_ID;
use crate::state::AppState;

/// Returns the authenticated client id.
pub fn authenticate(state: &AppState, headers: &HeaderMap, params: &Params) -> Result<String, OAuthError> {
    let Some(expected_secret) = &state.demo_client_secret else {
        return Err(OAuthError::InvalidClient);
    };
    if params.is_duplicated("client_id") || params.is_duplicated("client_secret") {
        return Err(OAuthError::InvalidRequest("repeated client credentials"));
    }
    let basic = match headers.get_all(AUTHORIZATION).iter().count() {
        0 => None,
        1 => Some(headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(parse_basic)),
        _ => return Err(OAuthError::InvalidRequest("repeated Authorization header")),
    };
    let (client_id, secret) = match (basic, params.get("client_secret")) {
        (Some(_), Some(_)) => return Err(OAuthError::InvalidRequest("more than one client authentication method")),
        // An Authorization header that is not valid Basic is a failed authentication attempt.
        (Some(None), None) => return Err(OAuthError::InvalidClient),
        (Some(Some((id, secret))), None) => {
            // A client_id in the body is allowed alongside Basic, but must name the same client.
            if params.get("client_id").is_some_and(|body_id| body_id != id) {
                return Err(OAuthError::InvalidClient);
            }
            (id, secret)
        }
        (None, Some(secret)) => {
            let id = params.get("client_id").ok_or(OAuthError::InvalidClient)?;
            (id.to_owned(), SecretString::from(secret.to_owned()))
        }
        (None, None) => return Err(OAuthError::InvalidClient),
    };
    // Both comparisons always run, so timing does not reveal which one failed.
    let id_ok = constant_time_eq(client_id.as_bytes(), DEMO_CLIENT_ID.as_bytes());
    let secret_ok = constant_time_eq(secret.expose_secret().as_bytes(), expected_secret.expose_secret().as_bytes());
    if id_ok & secret_ok { Ok(client_id) } else { Err(OAuthError::InvalidClient) }
}

/// Parses `Basic base64(urlencode(id) ":" urlencode(secret))` (RFC 6749 §2.3.1, RFC 7617).
pub fn parse_basic(header: &str) -> Option<(String, SecretString)> {
    let (scheme, credentials) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = STANDARD.decode(credentials.trim()).ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
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
        let (id, secret) = parse_basic(&basic("oauth-broker-demo:s%3Ae+cret%2B")).unwrap();
        assert_eq!(id, "oauth-broker-demo");
        assert_eq!(secret.expose_secret(), "s:e cret+");
        let (_, secret) = parse_basic(&basic("id:a:b")).unwrap();
        assert_eq!(secret.expose_secret(), "a:b", "only the first colon separates");
        assert!(parse_basic(&format!("basic {}", STANDARD.encode("id:s"))).is_some(), "scheme is case-insensitive");
    }

    #[test]
    fn malformed_basic_credentials_are_refused() {
        assert!(parse_basic("Bearer abc").is_none());
        assert!(parse_basic("Basic !!!").is_none());
        assert!(parse_basic(&basic("no-colon")).is_none());
        assert!(parse_basic(&basic(":secret")).is_none());
        assert!(parse_basic(&basic("id:%zz")).is_none());
        assert!(parse_basic("Basic").is_none());
    }
}
