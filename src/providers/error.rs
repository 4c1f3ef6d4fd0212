//! How a call to a provider's token or revocation endpoint failed, classified the way callers
//! must treat it: `invalid_grant` is terminal (re-consent), 5xx/timeouts/429 are transient (keep
//! the token, retry later), anything else is the provider refusing us.

use std::time::Duration;

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
    Unavailable(Transient),
    /// The provider answered something that is not OAuth.
    #[error("the provider's answer could not be understood")]
    BadResponse,
    #[error("provider configuration is invalid: {0}")]
    Misconfigured(String),
}

/// How a call ended, for the upstream metrics ([`crate::telemetry::provider_call`]).
impl crate::telemetry::Label for ProviderError {
    fn label(&self) -> &'static str {
        match self {
            ProviderError::InvalidGrant => "invalid_grant",
            ProviderError::Refused { .. } => "refused",
            ProviderError::Unavailable(_) => "unavailable",
            ProviderError::BadResponse => "bad_response",
            ProviderError::Misconfigured(_) => "misconfigured",
        }
    }
}

/// A transient failure: why, and when the provider asked to be called again (its
/// `Retry-After`, RFC 9110 §10.2.3), if it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transient {
    pub kind: TransientKind,
    pub reason: String,
    pub retry_after: Option<Duration>,
}

/// Which kind of transient failure, so the faces can say why a refresh is failing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransientKind {
    /// 429, or OAuth `slow_down`.
    RateLimited,
    /// 5xx, or OAuth `server_error` / `temporarily_unavailable`.
    ServerError,
    /// No answer in time.
    Timeout,
    /// No connection, or the exchange broke off.
    Unreachable,
}

impl std::fmt::Display for Transient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl ProviderError {
    /// A transient failure without a `Retry-After`.
    pub fn unavailable(kind: TransientKind, reason: impl Into<String>) -> Self {
        ProviderError::Unavailable(Transient { kind, reason: reason.into(), retry_after: None })
    }
}

/// `Retry-After` as delay-seconds or an HTTP-date (RFC 9110 §10.2.3), relative to now; `None`
/// when absent or unreadable (a date in the past is no wait at all).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(std::time::SystemTime::now()).unwrap_or_default())
}

pub(super) fn classify_oauth_error(error: &str) -> ProviderError {
    match error {
        // GitHub answers a dead refresh token with `bad_refresh_token` (HTTP 200): terminal too.
        // Slack says `invalid_code`, `code_already_used` and `invalid_refresh_token` (HTTP 200).
        "invalid_grant"
        | "bad_refresh_token"
        | "bad_verification_code"
        | "invalid_code"
        | "code_already_used"
        | "invalid_refresh_token" => ProviderError::InvalidGrant,
        "slow_down" => ProviderError::unavailable(TransientKind::RateLimited, error),
        "temporarily_unavailable" | "server_error" => ProviderError::unavailable(TransientKind::ServerError, error),
        other => ProviderError::Refused { error: other.chars().filter(|c| c.is_ascii_graphic()).take(64).collect() },
    }
}
