//! Client credentials at the token and revocation endpoints (RFC 6749 §2.3, OAuth 2.1 §2.4),
//! parsed the same way for every server: `client_secret_basic` (HTTP Basic), `client_secret_post`
//! (`client_secret` in the body) or `client_id` alone (a public client) — never two methods in
//! one request (§2.3), never a repeated credential. Whether the presented client exists and its
//! secret matches is each server's own check, handed the [`PresentedClient`].

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use secrecy::SecretString;

use super::oauth_error::OAuthError;
use super::params::{Params, decode_form_component};

/// RFC 7591 §2 `token_endpoint_auth_method`: a plain value of [`crate::domain`] (the store
/// keeps it for each registered client), re-exported where it is parsed.
pub use crate::domain::AuthMethod;

/// The client a request claims to come from, as it presented itself; not yet checked.
#[derive(Debug)]
pub struct PresentedClient {
    pub client_id: String,
    pub method: AuthMethod,
    /// `None` exactly when `method` is [`AuthMethod::None`].
    pub secret: Option<SecretString>,
}

/// Reads the one client authentication method the request uses.
pub fn presented_client(headers: &HeaderMap, params: &Params) -> Result<PresentedClient, OAuthError> {
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
    Ok(PresentedClient { client_id, method, secret })
}

/// Parses `Basic base64(urlencode(id) ":" urlencode(secret))` (RFC 6749 §2.3.1, RFC 7617).
/// Only the first ':' separates, so a secret that was not encoded may still contain one; a
/// malformed escape or invalid UTF-8 refuses the whole header. Also the token API's service
/// authentication ([`crate::identity::service_auth`]).
pub fn parse_basic(header: &str) -> Option<(String, SecretString)> {
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
    use secrecy::ExposeSecret;

    use super::*;

    fn basic(raw: &str) -> String {
        format!("Basic {}", STANDARD.encode(raw))
    }

    fn presented(header: Option<&str>, body: &str) -> Result<PresentedClient, OAuthError> {
        let mut headers = HeaderMap::new();
        if let Some(value) = header {
            headers.insert(AUTHORIZATION, value.parse().unwrap());
        }
        presented_client(&headers, &Params::parse(body.as_bytes()))
    }

    #[test]
    fn basic_credentials_are_form_decoded_after_base64() {
        let (id, secret) = parse_basic(&basic("client%3A1:s%3Ae+cret")).unwrap();
        assert_eq!(id, "client:1");
        assert_eq!(secret.expose_secret(), "s:e cret");
        let (id, secret) = parse_basic(&basic("oauth-broker-demo:s%3Ae+cret%2B")).unwrap();
        assert_eq!(id, "oauth-broker-demo");
        assert_eq!(secret.expose_secret(), "s:e cret+");
        let (_, secret) = parse_basic(&basic("id:a:b")).unwrap();
        assert_eq!(secret.expose_secret(), "a:b", "only the first colon separates");
        assert!(parse_basic(&format!("basic {}", STANDARD.encode("id:s"))).is_some(), "scheme is case-insensitive");
    }

    #[test]
    fn malformed_basic_credentials_are_refused() {
        for bad in ["Bearer abc", "Basic !!!", &basic("no-colon"), &basic(":secret"), &basic("id:%zz"), "Basic"] {
            assert!(parse_basic(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn each_method_is_recognised_and_two_at_once_are_refused() {
        let client = presented(Some(&basic("c:s")), "client_id=c").unwrap();
        assert_eq!((client.client_id.as_str(), client.method), ("c", AuthMethod::ClientSecretBasic));
        let client = presented(None, "client_id=c&client_secret=s").unwrap();
        assert_eq!(client.method, AuthMethod::ClientSecretPost);
        assert_eq!(client.secret.as_ref().map(|s| s.expose_secret().to_owned()).as_deref(), Some("s"));
        let client = presented(None, "client_id=c").unwrap();
        assert_eq!(client.method, AuthMethod::None);
        assert!(client.secret.is_none());

        assert_eq!(
            presented(Some(&basic("c:s")), "client_secret=s").unwrap_err(),
            OAuthError::InvalidRequest("more than one client authentication method")
        );
        assert_eq!(presented(Some(&basic("c:s")), "client_id=other").unwrap_err(), OAuthError::InvalidClient);
        assert_eq!(presented(Some("Bearer abc"), "").unwrap_err(), OAuthError::InvalidClient);
        assert_eq!(presented(None, "").unwrap_err(), OAuthError::InvalidClient);
        assert_eq!(
            presented(None, "client_id=a&client_id=b").unwrap_err(),
            OAuthError::InvalidRequest("repeated client credentials")
        );
    }
}
