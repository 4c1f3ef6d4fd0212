//! Calls to a provider's token and revocation endpoints.
//!
//! Requests are plain form posts (RFC 6749 §4.1.3, §6, RFC 7009, RFC 7636 §4.5) over our own
//! HTTP client, which follows no redirects (a token endpoint that redirects is misconfigured
//! or hostile) and has timeouts. Answers are read by [`super::token_response`], which knows
//! the ways real providers differ from RFC 6749 §5.1. Failures are classified the way callers
//! must treat them: `invalid_grant` is terminal (re-consent), 5xx/timeouts/429 are transient
//! (keep the token, retry later), anything else is the provider refusing us.

use std::time::Duration;

use oauth2::{PkceCodeChallenge, PkceCodeVerifier};
use secrecy::{ExposeSecret, SecretString};
use url::Url;

pub use super::error::{ProviderError, Transient, TransientKind, retry_after};
use super::provider::{ProviderConfig, TokenAuthMethod};
pub use super::token_response::{AccountRef, TokenSet};
use crate::domain::Scopes;

/// Largest token answer read; a bigger one is not a token answer.
const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;

/// The provider's authorization URL for this attempt (RFC 6749 §4.1.1, RFC 7636 §4.3), with
/// the scopes joined the provider's way and its extra parameters.
pub fn authorization_url(
    provider: &ProviderConfig,
    redirect_uri: &Url,
    scopes: &Scopes,
    state: &str,
    verifier: &SecretString,
) -> Result<Url, ProviderError> {
    let challenge =
        PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(verifier.expose_secret().to_owned()));
    let mut url = provider.authorization_url.clone();
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", &provider.client_id)
            .append_pair("state", state)
            .append_pair("code_challenge", challenge.as_str())
            .append_pair("code_challenge_method", "S256")
            .append_pair("redirect_uri", redirect_uri.as_str());
        if !scopes.is_empty() {
            let joined = scopes.iter().collect::<Vec<_>>().join(&provider.scope_separator);
            query.append_pair(&provider.scope_param, &joined);
        }
        for (name, value) in &provider.extra_authorize_params {
            query.append_pair(name, value);
        }
    }
    Ok(url)
}

/// A fresh PKCE verifier (RFC 7636 §4.1: 43-128 characters of unreserved; 32 random bytes).
pub fn new_pkce_verifier() -> SecretString {
    SecretString::from(crate::crypto::random_token(32))
}

pub async fn exchange_code(
    http: &reqwest::Client,
    provider: &ProviderConfig,
    redirect_uri: &Url,
    code: &str,
    verifier: &SecretString,
) -> Result<TokenSet, ProviderError> {
    let form = vec![
        ("grant_type", "authorization_code".to_owned()),
        ("code", code.to_owned()),
        ("redirect_uri", redirect_uri.to_string()),
        ("code_verifier", verifier.expose_secret().to_owned()),
    ];
    token_request(http, provider, &provider.token_url, form).await
}

/// RFC 6749 §6. `_redirect_uri` is not part of a refresh request; kept for callers.
pub async fn refresh(
    http: &reqwest::Client,
    provider: &ProviderConfig,
    _redirect_uri: &Url,
    refresh_token: &SecretString,
) -> Result<TokenSet, ProviderError> {
    let form =
        vec![("grant_type", "refresh_token".to_owned()), ("refresh_token", refresh_token.expose_secret().to_owned())];
    let url = provider.refresh_url.as_ref().unwrap_or(&provider.token_url);
    token_request(http, provider, url, form).await
}

/// One token-endpoint request with the client's authentication (RFC 6749 §2.3.1) and its
/// answer read.
async fn token_request(
    http: &reqwest::Client,
    provider: &ProviderConfig,
    url: &Url,
    mut form: Vec<(&'static str, String)>,
) -> Result<TokenSet, ProviderError> {
    // GitHub answers form-encoded unless JSON is asked for; others ignore the header.
    let mut request = http.post(url.clone()).header(reqwest::header::ACCEPT, "application/json");
    if let Some(agent) = &provider.user_agent {
        request = request.header(reqwest::header::USER_AGENT, agent);
    }
    request = authenticate(request, &mut form, provider);
    let response = request.form(&form).send().await.map_err(|e| unreached(&e))?;
    let status = response.status();
    // 5xx and 429 are transient whatever the body says: the token is kept, not given up, and
    // the provider's Retry-After says when to ask again.
    if status.is_server_error() || status.as_u16() == 429 {
        let kind = if status.as_u16() == 429 { TransientKind::RateLimited } else { TransientKind::ServerError };
        return Err(ProviderError::Unavailable(Transient {
            kind,
            reason: format!("the token endpoint answered {status}"),
            retry_after: retry_after(response.headers()),
        }));
    }
    let content_type =
        response.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
    if response.content_length().is_some_and(|n| n > MAX_TOKEN_RESPONSE_BYTES as u64) {
        return Err(ProviderError::BadResponse);
    }
    let body = response.bytes().await.map_err(|e| unreached(&e))?;
    if body.len() > MAX_TOKEN_RESPONSE_BYTES {
        return Err(ProviderError::BadResponse);
    }
    super::token_response::parse(provider, status.as_u16(), content_type.as_deref(), &body)
}

/// The client's credentials, the provider's way: Basic (each part form-encoded first, RFC 6749
/// §2.3.1), in the body, or only the id for a public client.
fn authenticate(
    request: reqwest::RequestBuilder,
    form: &mut Vec<(&'static str, String)>,
    provider: &ProviderConfig,
) -> reqwest::RequestBuilder {
    match (provider.token_auth_method, &provider.client_secret) {
        (TokenAuthMethod::ClientSecretBasic, Some(secret)) => {
            request.basic_auth(form_encode(&provider.client_id), Some(form_encode(secret.expose_secret())))
        }
        (TokenAuthMethod::ClientSecretPost, Some(secret)) => {
            form.push(("client_id", provider.client_id.clone()));
            form.push(("client_secret", secret.expose_secret().to_owned()));
            request
        }
        _ => {
            form.push(("client_id", provider.client_id.clone()));
            request
        }
    }
}

/// RFC 7009 revocation; a provider without a revocation endpoint is a no-op.
pub async fn revoke(
    http: &reqwest::Client,
    provider: &ProviderConfig,
    token: &SecretString,
    is_refresh_token: bool,
) -> Result<(), ProviderError> {
    let Some(url) = &provider.revocation_url else { return Ok(()) };
    let mut form: Vec<(&'static str, String)> = vec![("token", token.expose_secret().to_owned())];
    form.push(("token_type_hint", if is_refresh_token { "refresh_token" } else { "access_token" }.to_owned()));
    let mut request = http.post(url.clone());
    if let Some(agent) = &provider.user_agent {
        request = request.header(reqwest::header::USER_AGENT, agent);
    }
    let request = authenticate(request, &mut form, provider);
    let response = request.form(&form).send().await.map_err(|e| unreached(&e))?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else if status.is_server_error() || status.as_u16() == 429 {
        Err(ProviderError::unavailable(TransientKind::ServerError, format!("revocation endpoint answered {status}")))
    } else {
        Err(ProviderError::Refused { error: format!("revocation endpoint answered {status}") })
    }
}

/// RFC 6749 §2.3.1: client credentials in Basic auth are form-urlencoded first.
fn form_encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// A reqwest error without the URL (which could carry a secret in a misbehaving provider's
/// redirect) — only its kind.
/// A transient failure for a request that got no (whole) answer.
fn unreached(error: &reqwest::Error) -> ProviderError {
    let kind = if error.is_timeout() { TransientKind::Timeout } else { TransientKind::Unreachable };
    ProviderError::unavailable(kind, describe(error))
}

fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "timed out".into()
    } else if error.is_connect() {
        "could not connect".into()
    } else {
        "request failed".into()
    }
}

/// The HTTP client for provider calls: no redirects, bounded time.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(30))
        .user_agent(concat!("oauth-broker/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
}
