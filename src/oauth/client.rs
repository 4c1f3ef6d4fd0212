//! Calls to a provider's token and revocation endpoints.
//!
//! The `oauth2` crate builds and parses the requests (RFC 6749 §4.1.3, §6, RFC 7009, RFC 7636
//! §4.5); we give it our own HTTP client, which follows no redirects (a token endpoint that
//! redirects is misconfigured or hostile) and has timeouts. Failures are classified the way
//! callers must treat them: `invalid_grant` is terminal (re-consent), 5xx/timeouts/429 are
//! transient (keep the token, retry later), anything else is the provider refusing us.

use std::time::Duration;

use oauth2::basic::{BasicClient, BasicErrorResponseType, BasicTokenType};
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet, EndpointSet, HttpRequest,
    HttpResponse, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RefreshToken, RequestTokenError,
    StandardErrorResponse, TokenResponse, TokenUrl,
};
use secrecy::{ExposeSecret, SecretString};
use url::Url;

use crate::config::{ProviderConfig, TokenAuthMethod};
use crate::domain::Scopes;

/// Tokens a provider issued. Secrets stay in `SecretString` until sealed.
#[derive(Debug)]
pub struct TokenSet {
    pub access_token: SecretString,
    pub refresh_token: Option<SecretString>,
    pub expires_in: Option<Duration>,
    /// Scopes the provider says it granted (RFC 6749 §5.1: absent means "as requested").
    pub scopes: Option<Scopes>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The grant (code or refresh token) is invalid, expired or revoked: only a new consent helps.
    #[error("the provider rejected the grant (invalid_grant)")]
    InvalidGrant,
    /// Another OAuth error from the provider (RFC 6749 §5.2).
    #[error("the provider refused: {error}")]
    Refused { error: String },
    /// Network failure, timeout, 5xx or 429: worth retrying later.
    #[error("the provider is unavailable: {0}")]
    Unavailable(String),
    /// The provider answered something that is not OAuth.
    #[error("the provider's answer could not be understood")]
    BadResponse,
    #[error("provider configuration is invalid: {0}")]
    Misconfigured(String),
}

type ConfiguredClient = oauth2::Client<
    StandardErrorResponse<BasicErrorResponseType>,
    oauth2::StandardTokenResponse<oauth2::EmptyExtraTokenFields, BasicTokenType>,
    oauth2::StandardTokenIntrospectionResponse<oauth2::EmptyExtraTokenFields, BasicTokenType>,
    oauth2::StandardRevocableToken,
    StandardErrorResponse<oauth2::RevocationErrorResponseType>,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointSet,
>;

fn oauth_client(provider: &ProviderConfig, redirect_uri: &Url) -> Result<ConfiguredClient, ProviderError> {
    let mut client = BasicClient::new(ClientId::new(provider.client_id.clone()))
        .set_auth_uri(AuthUrl::from_url(provider.authorization_url.clone()))
        .set_token_uri(TokenUrl::from_url(provider.token_url.clone()))
        .set_redirect_uri(RedirectUrl::from_url(redirect_uri.clone()))
        .set_auth_type(match provider.token_auth_method {
            TokenAuthMethod::ClientSecretBasic => AuthType::BasicAuth,
            TokenAuthMethod::ClientSecretPost => AuthType::RequestBody,
        });
    if let Some(secret) = &provider.client_secret {
        client = client.set_client_secret(ClientSecret::new(secret.expose_secret().to_owned()));
    }
    Ok(client)
}

/// The provider's authorization URL for this attempt (RFC 6749 §4.1.1, RFC 7636 §4.3).
pub fn authorization_url(
    provider: &ProviderConfig,
    redirect_uri: &Url,
    scopes: &Scopes,
    state: &str,
    verifier: &SecretString,
) -> Result<Url, ProviderError> {
    let client = oauth_client(provider, redirect_uri)?;
    let challenge =
        PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(verifier.expose_secret().to_owned()));
    let state = state.to_owned();
    let mut request = client
        .authorize_url(move || CsrfToken::new(state))
        .set_pkce_challenge(challenge)
        .add_scopes(scopes.iter().map(|s| oauth2::Scope::new(s.to_owned())));
    for (name, value) in &provider.extra_authorize_params {
        request = request.add_extra_param(name.clone(), value.clone());
    }
    Ok(request.url().0)
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
    let client = oauth_client(provider, redirect_uri)?;
    let send = sender(http);
    let result = client
        .exchange_code(AuthorizationCode::new(code.to_owned()))
        .set_pkce_verifier(PkceCodeVerifier::new(verifier.expose_secret().to_owned()))
        .request_async(&send)
        .await;
    token_set(result)
}

pub async fn refresh(
    http: &reqwest::Client,
    provider: &ProviderConfig,
    redirect_uri: &Url,
    refresh_token: &SecretString,
) -> Result<TokenSet, ProviderError> {
    let client = oauth_client(provider, redirect_uri)?;
    let send = sender(http);
    let token = RefreshToken::new(refresh_token.expose_secret().to_owned());
    let result = client.exchange_refresh_token(&token).request_async(&send).await;
    token_set(result)
}

/// RFC 7009 revocation; a provider without a revocation endpoint is a no-op.
pub async fn revoke(
    http: &reqwest::Client,
    provider: &ProviderConfig,
    token: &SecretString,
    is_refresh_token: bool,
) -> Result<(), ProviderError> {
    let Some(url) = &provider.revocation_url else { return Ok(()) };
    let mut form = vec![("token", token.expose_secret().to_owned())];
    form.push(("token_type_hint", if is_refresh_token { "refresh_token" } else { "access_token" }.to_owned()));
    let mut request = http.post(url.clone());
    match (provider.token_auth_method, &provider.client_secret) {
        (TokenAuthMethod::ClientSecretBasic, Some(secret)) => {
            request = request.basic_auth(form_encode(&provider.client_id), Some(form_encode(secret.expose_secret())));
        }
        (_, secret) => {
            form.push(("client_id", provider.client_id.clone()));
            if let Some(secret) = secret {
                form.push(("client_secret", secret.expose_secret().to_owned()));
            }
        }
    }
    let response = request.form(&form).send().await.map_err(|e| ProviderError::Unavailable(describe(&e)))?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else if status.is_server_error() || status.as_u16() == 429 {
        Err(ProviderError::Unavailable(format!("revocation endpoint answered {status}")))
    } else {
        Err(ProviderError::Refused { error: format!("revocation endpoint answered {status}") })
    }
}

/// RFC 6749 §2.3.1: client credentials in Basic auth are form-urlencoded first.
fn form_encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpError(String);

/// Adapts our reqwest client to the `oauth2` crate's request/response types.
fn sender(
    http: &reqwest::Client,
) -> impl Fn(HttpRequest) -> std::pin::Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send>> + '_ {
    move |request: HttpRequest| {
        let http = http.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let url = parts.uri.to_string();
            let response = http
                .request(parts.method, url)
                .headers(parts.headers)
                .body(body)
                .send()
                .await
                .map_err(|e| HttpError(describe(&e)))?;
            let status = response.status();
            // 5xx and 429 are transient whatever the body says; reporting them as transport
            // errors keeps the token instead of treating the provider's outage as a refusal.
            if status.is_server_error() || status.as_u16() == 429 {
                return Err(HttpError(format!("the token endpoint answered {status}")));
            }
            let headers = response.headers().clone();
            let bytes = response.bytes().await.map_err(|e| HttpError(describe(&e)))?;
            let mut out = http::Response::builder().status(status);
            if let Some(h) = out.headers_mut() {
                *h = headers;
            }
            out.body(bytes.to_vec()).map_err(|e| HttpError(e.to_string()))
        })
    }
}

/// A reqwest error without the URL (which could carry a secret in a misbehaving provider's
/// redirect) — only its kind.
fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "timed out".into()
    } else if error.is_connect() {
        "could not connect".into()
    } else {
        "request failed".into()
    }
}

type TokenResult = Result<
    oauth2::StandardTokenResponse<oauth2::EmptyExtraTokenFields, BasicTokenType>,
    RequestTokenError<HttpError, StandardErrorResponse<BasicErrorResponseType>>,
>;

fn token_set(result: TokenResult) -> Result<TokenSet, ProviderError> {
    match result {
        Ok(response) => {
            let scopes = match response.scopes() {
                Some(list) => {
                    Some(Scopes::parse(list.iter().map(|s| s.as_str())).map_err(|_| ProviderError::BadResponse)?)
                }
                None => None,
            };
            Ok(TokenSet {
                access_token: SecretString::from(response.access_token().secret().to_owned()),
                refresh_token: response.refresh_token().map(|t| SecretString::from(t.secret().to_owned())),
                expires_in: response.expires_in(),
                scopes,
            })
        }
        Err(RequestTokenError::ServerResponse(error)) => Err(classify_oauth_error(error.error().as_ref())),
        Err(RequestTokenError::Request(e)) => Err(ProviderError::Unavailable(e.0)),
        Err(RequestTokenError::Parse(_, body)) => {
            // Some providers (GitHub) answer errors with HTTP 200; read the body as an error.
            #[derive(serde::Deserialize)]
            struct ErrorBody {
                error: String,
            }
            match serde_json::from_slice::<ErrorBody>(&body) {
                Ok(e) => Err(classify_oauth_error(&e.error)),
                Err(_) => Err(ProviderError::BadResponse),
            }
        }
        // An error status without an OAuth error body (5xx/429 never get here, see `sender`).
        Err(RequestTokenError::Other(_)) => Err(ProviderError::BadResponse),
    }
}

fn classify_oauth_error(error: &str) -> ProviderError {
    match error {
        // GitHub answers a dead refresh token with `bad_refresh_token` (HTTP 200): terminal too.
        "invalid_grant" | "bad_refresh_token" | "bad_verification_code" => ProviderError::InvalidGrant,
        "temporarily_unavailable" | "server_error" | "slow_down" => ProviderError::Unavailable(error.to_owned()),
        other => ProviderError::Refused { error: other.chars().filter(|c| c.is_ascii_graphic()).take(64).collect() },
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
