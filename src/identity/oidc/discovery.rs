//! OpenID Connect Discovery 1.0 §4: `{issuer}/.well-known/openid-configuration`.
//!
//! The document's `issuer` must be exactly the issuer we were configured with (§4.3: this is what
//! stops one issuer's document from speaking for another), and every endpoint we will call must be
//! https (http only when the issuer itself is on loopback, for development and tests). The
//! configured issuer is a parsed URL, which adds a `/` to a bare origin; a bare-origin issuer may
//! therefore be spelled with or without that slash (Auth0 uses one, most do not), and the spelling
//! the issuer's own document uses is the one every `iss` claim must then equal.

use serde::Deserialize;
use url::Url;

use super::fetch::get_json;
use super::oidc_error::OidcError;
use crate::net::is_loopback;

/// Discovery documents are a few kilobytes; refuse anything much larger.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// What we use from the issuer's metadata, checked.
#[derive(Debug, Clone)]
pub struct ProviderMetadata {
    /// Exactly as the issuer writes it; `iss` claims must equal this string.
    pub issuer: String,
    pub jwks_uri: Url,
    /// Absent for issuers that only mint access tokens; browser sign-in then cannot work.
    pub authorization_endpoint: Option<Url>,
    pub token_endpoint: Option<Url>,
    /// RFC 9207: the authorization response must then carry `iss`.
    pub authorization_response_iss_parameter_supported: bool,
    /// `client_secret_basic` unless the issuer lists only `client_secret_post`.
    pub token_endpoint_auth_methods_supported: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Document {
    issuer: String,
    jwks_uri: Url,
    authorization_endpoint: Option<Url>,
    token_endpoint: Option<Url>,
    #[serde(default)]
    authorization_response_iss_parameter_supported: bool,
    #[serde(default)]
    token_endpoint_auth_methods_supported: Vec<String>,
    #[serde(default)]
    code_challenge_methods_supported: Option<Vec<String>>,
}

/// The spellings of the configured issuer that its document may use (see the module docs).
pub fn issuer_spellings(configured: &Url) -> Vec<String> {
    let full = configured.as_str().to_owned();
    if configured.path() == "/" && configured.query().is_none() {
        vec![full.trim_end_matches('/').to_owned(), full]
    } else {
        vec![full]
    }
}

/// Where the discovery document of `configured` lives (§4.1: the path is appended).
pub fn discovery_url(configured: &Url) -> Result<Url, OidcError> {
    let base = configured.as_str().trim_end_matches('/');
    Url::parse(&format!("{base}/.well-known/openid-configuration"))
        .map_err(|_| OidcError::BadIssuerResponse("the issuer URL cannot carry a discovery path".into()))
}

/// Fetches and checks the discovery document.
pub async fn fetch(http: &reqwest::Client, configured: &Url) -> Result<ProviderMetadata, OidcError> {
    let url = discovery_url(configured)?;
    let document: Document = get_json(http, &url, MAX_DOCUMENT_BYTES).await?;
    check(document, configured)
}

fn check(document: Document, configured: &Url) -> Result<ProviderMetadata, OidcError> {
    if !issuer_spellings(configured).contains(&document.issuer) {
        return Err(OidcError::BadIssuerResponse(format!(
            "discovery document names issuer {:?}, not the configured {}",
            document.issuer.chars().take(200).collect::<String>(),
            configured
        )));
    }
    let loopback_issuer = is_loopback(configured);
    let endpoints =
        [Some(&document.jwks_uri), document.authorization_endpoint.as_ref(), document.token_endpoint.as_ref()];
    for url in endpoints.into_iter().flatten() {
        let allowed = url.scheme() == "https" || (loopback_issuer && url.scheme() == "http" && is_loopback(url));
        if !allowed {
            return Err(OidcError::BadIssuerResponse(format!("endpoint {url} is not https")));
        }
    }
    if let Some(methods) = &document.code_challenge_methods_supported
        && !methods.iter().any(|m| m == "S256")
    {
        // We send PKCE S256 anyway (RFC 9700 §2.1.1); an issuer that ignores it still works.
        tracing::warn!(issuer = %document.issuer, "the OIDC issuer does not advertise PKCE S256");
    }
    Ok(ProviderMetadata {
        issuer: document.issuer,
        jwks_uri: document.jwks_uri,
        authorization_endpoint: document.authorization_endpoint,
        token_endpoint: document.token_endpoint,
        authorization_response_iss_parameter_supported: document.authorization_response_iss_parameter_supported,
        token_endpoint_auth_methods_supported: document.token_endpoint_auth_methods_supported,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(issuer: &str, jwks: &str) -> Document {
        serde_json::from_value(serde_json::json!({
            "issuer": issuer, "jwks_uri": jwks,
            "authorization_endpoint": "https://idp.example/authorize", "token_endpoint": "https://idp.example/token",
        }))
        .unwrap()
    }

    #[test]
    fn the_document_must_name_the_configured_issuer_exactly() {
        let configured = Url::parse("https://idp.example").unwrap();
        assert!(check(document("https://idp.example", "https://idp.example/jwks"), &configured).is_ok());
        assert!(check(document("https://idp.example/", "https://idp.example/jwks"), &configured).is_ok());
        for other in ["https://evil.example", "https://idp.example/x", "https://IDP.example", "http://idp.example"] {
            assert!(check(document(other, "https://idp.example/jwks"), &configured).is_err(), "{other}");
        }
        let realm = Url::parse("https://kc.example/realms/acme").unwrap();
        assert!(check(document("https://kc.example/realms/acme", "https://kc.example/jwks"), &realm).is_ok());
        assert!(check(document("https://kc.example/realms/acme/", "https://kc.example/jwks"), &realm).is_err());
        assert_eq!(
            discovery_url(&realm).unwrap().as_str(),
            "https://kc.example/realms/acme/.well-known/openid-configuration"
        );
    }

    #[test]
    fn endpoints_must_be_https_unless_the_issuer_is_on_loopback() {
        let configured = Url::parse("https://idp.example").unwrap();
        assert!(check(document("https://idp.example", "http://idp.example/jwks"), &configured).is_err());
        let local = Url::parse("http://127.0.0.1:9000").unwrap();
        assert!(check(document("http://127.0.0.1:9000", "http://127.0.0.1:9000/jwks"), &local).is_ok());
        assert!(check(document("http://127.0.0.1:9000", "http://10.0.0.1/jwks"), &local).is_err());
    }
}
