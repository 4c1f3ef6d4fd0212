//! The tool server's side of the broker's token API for tool servers (`src/api/`): the core of
//! this example. It answers "what does the demo provider say about this user, and if nothing yet,
//! what must the user do", in its own types; `tool.rs` turns that into MCP.
//!
//! ```text
//! exchange: POST {broker}/token (RFC 8693, Basic client auth)  → provider token
//!           GET  {broker}/demo-provider/api/me  (Bearer provider token)
//! proxy:    GET  {broker}/v1/proxy/demo/me      (Basic + X-Subject-Token); no token here at all
//! either:   GET  {broker}/v1/authorizations/{id}?wait=30  while the user approves in a browser
//! ```
//!
//! The user token and the provider token are [`SecretString`]s: they go into request headers
//! and bodies only, never into a URL, a log line or an error.

use std::time::Duration;

use base64::Engine;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use reqwest::{Response, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::Value;
use url::Url;

/// The provider this tool server needs, as the broker's admin registered it.
pub const PROVIDER: &str = "demo";
/// `GET /api/me` of the demo provider needs this scope (src/demo_provider/scopes.rs); asking for
/// it in the exchange makes the broker send the user to approve it if the grant lacks it.
const SCOPE: &str = "profile";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// Prefix of the broker's RFC 9457 problem types; anything else from the proxy is the provider's.
const PROBLEM_TYPE_PREFIX: &str = "urn:oauth-broker:problem:";
/// `?wait=` of the watcher's long polls.
pub const WAIT_SECONDS: u64 = 30;
/// The longest `?wait=` the broker allows.
pub const MAX_WAIT_SECONDS: u64 = 60;

/// How the tool gets at the provider (`--mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Exchange the user token for a provider token (`POST /token`), then call the provider.
    Exchange,
    /// Let the broker call the provider (`/v1/proxy/…`); the provider token never leaves it.
    Proxy,
}

/// Why the provider's answer could not be had.
#[derive(Debug)]
pub enum Refusal {
    /// The user must approve something in a browser first (boxed: the other variants are small).
    AuthorizationRequired(Box<PendingAuthorization>),
    /// The broker refused the user's token (expired, revoked, or issued for another resource).
    SubjectToken,
    /// The broker refused this tool server's own credentials: an operator problem.
    Client,
    /// The provider is down or rate-limited; the broker suggests when to retry.
    ProviderUnavailable { retry_after: Option<u64> },
    /// Another refusal of the broker (`forbidden`, …), with its own words.
    Broker { code: String, detail: String },
    /// The provider itself answered with an error status.
    Provider { status: StatusCode, detail: String },
    /// The broker could not be reached, or answered something that is not its API.
    Unreachable(String),
}

/// An authorization the broker opened: its id is the MCP 2025-11-25 elicitationId (and what a
/// 2026-07-28 `requestState` holds), its URL the broker's own page (never made up here).
#[derive(Debug, Clone, Deserialize)]
pub struct PendingAuthorization {
    pub id: String,
    pub url: Url,
    #[serde(default)]
    pub expires_at: Option<i64>,
    /// `not_connected | needs_reconsent | missing_scopes | consent_required`, from the error.
    #[serde(skip)]
    pub reason: Option<String>,
    #[serde(skip)]
    pub missing_scopes: Vec<String>,
}

/// `GET /v1/authorizations/{id}` `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthorizationStatus {
    Pending,
    Completed,
    Declined,
    Failed,
    Expired,
}

/// What one long poll learned.
pub enum Poll {
    Status(AuthorizationStatus),
    /// 404 `unknown_authorization`: gone, or never ours.
    Unknown,
    /// Network or server trouble; worth another try later.
    Transient(String),
}

/// Both refusal shapes the broker uses: RFC 9457 problem JSON (`code`, `detail`) on `/v1` and
/// RFC 6749 §5.2 error JSON (`error`, `error_description`) on `/token`, with the same extras.
#[derive(Debug, Default, Deserialize)]
struct ErrorBody {
    #[serde(rename = "type")]
    problem_type: Option<String>,
    code: Option<String>,
    error: Option<String>,
    detail: Option<String>,
    title: Option<String>,
    error_description: Option<String>,
    reason: Option<String>,
    #[serde(default)]
    missing_scopes: Vec<String>,
    authorization: Option<PendingAuthorization>,
    retry_after: Option<u64>,
}

/// RFC 8693 §2.2.1 (only what we use; `access_token` stays secret).
#[derive(Deserialize)]
struct ExchangeResponse {
    access_token: SecretString,
}

#[derive(Deserialize)]
struct AuthorizationState {
    status: AuthorizationStatus,
}

pub struct BrokerClient {
    http: reqwest::Client,
    base: Url,
    /// `Basic base64(urlencode(client_id):urlencode(secret))`, marked sensitive.
    client_auth: HeaderValue,
}

impl BrokerClient {
    pub fn new(base: Url, client_id: &str, client_secret: &SecretString) -> anyhow::Result<Self> {
        anyhow::ensure!(matches!(base.scheme(), "http" | "https"), "--broker must be an http(s) URL");
        anyhow::ensure!(!base.cannot_be_a_base(), "--broker must be an absolute URL");
        let http = reqwest::Client::builder()
            // Credentials and tokens go to the broker only, never to where a redirect points.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(20))
            .user_agent(concat!("oauth-broker-example-tool-server/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self { http, base, client_auth: basic_auth(client_id, client_secret)? })
    }

    /// The broker's issuer identifier, for RFC 9728 `authorization_servers`.
    pub fn issuer(&self) -> String {
        self.base.as_str().trim_end_matches('/').to_owned()
    }

    /// `GET /me` at the demo provider for the user whose token this is.
    pub async fn whoami(&self, mode: Mode, user_token: &SecretString) -> Result<Value, Refusal> {
        match mode {
            Mode::Exchange => {
                let provider_token = self.exchange(user_token).await?;
                let response = self
                    .http
                    .get(self.url(&["demo-provider", "api", "me"]))
                    .bearer_auth(provider_token.expose_secret())
                    .send()
                    .await
                    .map_err(unreachable)?;
                provider_answer(response).await
            }
            Mode::Proxy => {
                let response = self
                    .http
                    .get(self.url(&["v1", "proxy", PROVIDER, "me"]))
                    .header(AUTHORIZATION, self.client_auth.clone())
                    .header("x-subject-token", sensitive(user_token)?)
                    .send()
                    .await
                    .map_err(unreachable)?;
                if is_broker_problem(&response) {
                    return Err(refusal(response).await);
                }
                provider_answer(response).await
            }
        }
    }

    // RFC 8693 §2.1 at the broker's `/token`, client authentication per RFC 6749 §2.3.1.
    async fn exchange(&self, user_token: &SecretString) -> Result<SecretString, Refusal> {
        let form = [
            ("grant_type", TOKEN_EXCHANGE),
            ("subject_token", user_token.expose_secret()),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
            ("provider", PROVIDER),
            ("scope", SCOPE),
        ];
        let response = self
            .http
            .post(self.url(&["token"]))
            .header(AUTHORIZATION, self.client_auth.clone())
            .form(&form)
            .send()
            .await
            .map_err(unreachable)?;
        if !response.status().is_success() {
            return Err(refusal(response).await);
        }
        let body: ExchangeResponse =
            response.json().await.map_err(|_| Refusal::Unreachable("the broker's token answer was not JSON".into()))?;
        Ok(body.access_token)
    }

    /// One long poll of an authorization's status, waiting at most `wait_seconds` (the broker
    /// caps it at [`MAX_WAIT_SECONDS`]; `?wait=` returns early on a final status, 0 answers at once).
    pub async fn poll_authorization(&self, id: &str, wait_seconds: u64) -> Poll {
        let wait_seconds = wait_seconds.min(MAX_WAIT_SECONDS);
        let mut url = self.url(&["v1", "authorizations", id]);
        url.query_pairs_mut().append_pair("wait", &wait_seconds.to_string());
        let sent = self
            .http
            .get(url)
            .header(AUTHORIZATION, self.client_auth.clone())
            .timeout(Duration::from_secs(wait_seconds + 15))
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(error) => return Poll::Transient(describe(error)),
        };
        match response.status() {
            status if status.is_success() => match response.json::<AuthorizationState>().await {
                Ok(state) => Poll::Status(state.status),
                Err(_) => Poll::Transient("unreadable authorization status".into()),
            },
            StatusCode::NOT_FOUND => Poll::Unknown,
            status => Poll::Transient(format!("the broker answered {status}")),
        }
    }

    /// `{broker}/a/b/c`, each part one encoded path segment (an id cannot add `/` or `?`).
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        url.set_query(None);
        url.set_fragment(None);
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }
}

/// The provider's answer: its JSON on success, else its status and the start of its error.
async fn provider_answer(response: Response) -> Result<Value, Refusal> {
    let status = response.status();
    if status.is_success() {
        return response
            .json()
            .await
            .map_err(|_| Refusal::Provider { status, detail: "the answer was not JSON".into() });
    }
    let text = response.text().await.unwrap_or_default();
    // RFC 6750 §3.1 errors from the demo provider are short JSON; cap anything else.
    let detail: String = text.chars().take(300).collect();
    Err(Refusal::Provider { status, detail })
}

/// The proxy returns the provider's answer as is; a refusal of the broker's own is problem JSON
/// with one of its problem types.
fn is_broker_problem(response: &Response) -> bool {
    let problem = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/problem+json"));
    problem && !response.status().is_success()
}

/// Reads a refusal of the broker's, in either shape.
async fn refusal(response: Response) -> Refusal {
    let status = response.status();
    let header_retry =
        response.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok());
    let body: ErrorBody = response.json().await.unwrap_or_default();
    if let Some(kind) = body.problem_type.as_deref()
        && !kind.starts_with(PROBLEM_TYPE_PREFIX)
    {
        return Refusal::Unreachable(format!("unexpected problem type from the broker ({status})"));
    }
    let code = body.code.or(body.error).unwrap_or_default();
    let detail = body.detail.or(body.error_description).or(body.title).unwrap_or_else(|| status.to_string());
    match code.as_str() {
        "authorization_required" => match body.authorization {
            // Only http(s) links are passed on to a client to open.
            Some(mut authorization) if matches!(authorization.url.scheme(), "http" | "https") => {
                authorization.reason = body.reason;
                authorization.missing_scopes = body.missing_scopes;
                Refusal::AuthorizationRequired(Box::new(authorization))
            }
            _ => Refusal::Unreachable("authorization_required without a usable authorization".into()),
        },
        "provider_unavailable" => Refusal::ProviderUnavailable { retry_after: body.retry_after.or(header_retry) },
        "invalid_client" => Refusal::Client,
        _ if status == StatusCode::UNAUTHORIZED => Refusal::SubjectToken,
        "" => Refusal::Unreachable(format!("the broker answered {status}")),
        _ => Refusal::Broker { code, detail },
    }
}

fn unreachable(error: reqwest::Error) -> Refusal {
    Refusal::Unreachable(format!("could not reach the broker: {}", describe(error)))
}

/// reqwest's message with its causes ("error sending request" alone says little), without the
/// URL (which holds nothing secret, but is noise to a user).
fn describe(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

// RFC 6749 §2.3.1: id and secret are form-urlencoded before being joined and base64-encoded.
fn basic_auth(client_id: &str, client_secret: &SecretString) -> anyhow::Result<HeaderValue> {
    let encode = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let pair = format!("{}:{}", encode(client_id), encode(client_secret.expose_secret()));
    let value = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair));
    let mut header = HeaderValue::from_str(&value)?;
    header.set_sensitive(true);
    Ok(header)
}

fn sensitive(token: &SecretString) -> Result<HeaderValue, Refusal> {
    let mut value = HeaderValue::from_str(token.expose_secret()).map_err(|_| Refusal::SubjectToken)?;
    value.set_sensitive(true);
    Ok(value)
}
