//! Reading a token endpoint's answer (RFC 6749 §5.1, §5.2) as real providers send it:
//!
//! - form-encoded (GitHub without `Accept: application/json`) as well as JSON;
//! - an error with HTTP 200 (GitHub, Slack's `ok: false`);
//! - `expires_in` as a number, a string of digits, or absent;
//! - `scope` space- or comma-separated (GitHub: `repo,gist`), a JSON list (Twitch), empty
//!   (meaning "as requested", §5.1), or in other spellings (Google's URLs: `scope_aliases`);
//! - the token nested in another object (Slack v2's `authed_user`: `token_path`);
//! - fields beyond the RFC kept where they matter: a per-grant API base (Salesforce
//!   `instance_url`) and the account (Notion's `owner.user.id`).
//!
//! Nothing here logs or returns the body: it holds tokens.

use std::time::Duration;

use secrecy::SecretString;
use serde_json::{Map, Value};
use url::Url;

use super::error::{ProviderError, classify_oauth_error};
use super::provider::ProviderConfig;
use crate::domain::Scopes;
use crate::net::is_loopback;

/// Tokens a provider issued. Secrets stay in `SecretString` until sealed.
#[derive(Debug)]
pub struct TokenSet {
    pub access_token: SecretString,
    pub refresh_token: Option<SecretString>,
    pub expires_in: Option<Duration>,
    /// Scopes the provider says it granted (RFC 6749 §5.1: absent means "as requested"), in
    /// the spellings the broker asks with.
    pub scopes: Option<Scopes>,
    /// This grant's API base when the provider names one with the token (Salesforce).
    pub api_base_url: Option<Url>,
    /// The account, when the provider names it in the token answer rather than at a userinfo
    /// endpoint (Notion).
    pub account: Option<AccountRef>,
}

/// A provider's account: its stable id, and a label to show beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountRef {
    pub id: String,
    pub label: Option<String>,
}

/// No token lives longer than this; a bigger `expires_in` is read as this.
const MAX_EXPIRES_IN: u64 = 10 * 365 * 24 * 3600;

/// Parses one token answer for `provider`.
pub fn parse(
    provider: &ProviderConfig,
    status: u16,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<TokenSet, ProviderError> {
    let answer = object(content_type, body).ok_or(ProviderError::BadResponse)?;
    // §5.2, and providers that send errors with 200: an `error` member is an error whatever the
    // status.
    if let Some(error) = answer.get("error") {
        let code = error.as_str().unwrap_or("unknown");
        return Err(classify_oauth_error(code));
    }
    if !(200..300).contains(&status) || answer.get("ok") == Some(&Value::Bool(false)) {
        return Err(ProviderError::BadResponse);
    }
    let token = match &provider.token_path {
        Some(path) => lookup(&answer, path).and_then(Value::as_object).ok_or(ProviderError::BadResponse)?,
        None => &answer,
    };
    let access_token = text(token.get("access_token")).ok_or(ProviderError::BadResponse)?;
    let refresh_token = text(token.get("refresh_token")).map(SecretString::from);
    Ok(TokenSet {
        access_token: SecretString::from(access_token),
        refresh_token,
        expires_in: expires_in(token.get("expires_in"))?,
        scopes: scopes(provider, token.get("scope"))?,
        api_base_url: api_base(provider, &answer)?,
        account: account_in_answer(provider, &answer),
    })
}

/// The body as a JSON object: JSON when it says so or looks like it, else form-encoded.
fn object(content_type: Option<&str>, body: &[u8]) -> Option<Map<String, Value>> {
    let media = content_type.unwrap_or_default().split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let looks_json = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if media.ends_with("json") || (looks_json && media != "application/x-www-form-urlencoded") {
        return match serde_json::from_slice(body) {
            Ok(Value::Object(map)) => Some(map),
            _ => None,
        };
    }
    let text = std::str::from_utf8(body).ok()?;
    if !text.contains('=') {
        return None;
    }
    Some(
        url::form_urlencoded::parse(text.trim().as_bytes())
            .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
            .collect(),
    )
}

/// A non-empty string member.
fn text(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// A member by dot path (`owner.user.id`).
pub fn lookup<'a>(map: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut current = map.get(parts.next()?)?;
    for part in parts {
        current = current.as_object()?.get(part)?;
    }
    Some(current)
}

/// A scalar as text (ids are numbers at GitHub, strings elsewhere).
pub fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.is_empty() => Some(s.chars().take(256).collect()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn expires_in(value: Option<&Value>) -> Result<Option<Duration>, ProviderError> {
    let seconds = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(None),
        Some(Value::String(s)) => s.trim().parse::<u64>().map_err(|_| ProviderError::BadResponse)?,
        Some(Value::Number(n)) => match (n.as_u64(), n.as_f64()) {
            (Some(n), _) => n,
            (None, Some(f)) if f >= 0.0 => f as u64,
            _ => return Err(ProviderError::BadResponse),
        },
        Some(_) => return Err(ProviderError::BadResponse),
    };
    Ok(Some(Duration::from_secs(seconds.min(MAX_EXPIRES_IN))))
}

/// The granted scopes in our spellings; `None` when the answer names none (§5.1: as requested).
fn scopes(provider: &ProviderConfig, value: Option<&Value>) -> Result<Option<Scopes>, ProviderError> {
    let items: Vec<String> = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => {
            s.split(|c: char| c == ',' || c.is_whitespace()).filter(|s| !s.is_empty()).map(str::to_owned).collect()
        }
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| v.as_str().map(str::to_owned).ok_or(ProviderError::BadResponse))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(ProviderError::BadResponse),
    };
    if items.is_empty() {
        return Ok(None);
    }
    let mapped = items.iter().map(|s| provider.scope_aliases.get(s).unwrap_or(s));
    Scopes::parse(mapped).map(Some).map_err(|_| ProviderError::BadResponse)
}

/// The API base named in the answer (`api_base_from_token`), checked like a configured one and
/// held to the provider's domains, with the configured base's path under it.
fn api_base(provider: &ProviderConfig, answer: &Map<String, Value>) -> Result<Option<Url>, ProviderError> {
    let Some(field) = &provider.api_base_from_token else { return Ok(None) };
    let Some(raw) = lookup(answer, field).and_then(Value::as_str) else { return Ok(None) };
    let mut url = Url::parse(raw).map_err(|_| ProviderError::BadResponse)?;
    let secure = url.scheme() == "https" || (url.scheme() == "http" && is_loopback(&url));
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    let allowed = provider.api_base_domains.iter().any(|d| host == *d || host.ends_with(&format!(".{d}")));
    if !secure || !allowed || !url.username().is_empty() || url.query().is_some() || url.fragment().is_some() {
        tracing::warn!(provider = %provider.id, host, "token answer named an API base outside the provider's domains");
        return Err(ProviderError::BadResponse);
    }
    url.set_path(provider.api_base_url.path());
    Ok(Some(url))
}

/// The account, for a provider without a userinfo endpoint that names it in the token answer.
fn account_in_answer(provider: &ProviderConfig, answer: &Map<String, Value>) -> Option<AccountRef> {
    if provider.userinfo_url.is_some() {
        return None;
    }
    let id = lookup(answer, provider.account_id_field.as_deref()?).and_then(scalar)?;
    let label = provider.account_label_field.as_deref().and_then(|f| lookup(answer, f)).and_then(scalar);
    Some(AccountRef { id, label })
}

#[cfg(test)]
#[path = "token_response_tests.rs"]
mod tests;
