//! One HTTP exchange with a provider's API: the user's token as the bearer credential (or an
//! API key, sent the way the provider's entry says), the
//! provider's own API headers (`user_agent`, `api_headers`), no redirects followed (the client
//! in [`crate::broker::Core::http`] follows none), and an answer that may be handed to anyone:
//! only the headers worth showing (never an authentication or cookie header), at most
//! [`MAX_BODY_BYTES`] of body, and every token the call used replaced by `[redacted]`, also
//! where the cut would split one. An API that echoes the request (debug endpoints do) must not
//! leak the token to the client.

use std::collections::BTreeMap;

use secrecy::{ExposeSecret, SecretString};
use url::Url;

use super::request::{ApiRequest, Body};
use crate::config::ProviderConfig;

/// Largest upstream body returned; the rest is cut (and flagged).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Response headers worth showing (paging, rate limits, caching, content type).
const FORWARDED_HEADERS: &[&str] = &["content-type", "link", "location", "etag", "last-modified", "retry-after"];
const FORWARDED_PREFIXES: &[&str] = &["x-ratelimit-", "ratelimit-", "x-total-count", "x-next-page"];

/// The provider's answer, safe to hand out: its status, the headers worth showing, and at most
/// [`MAX_BODY_BYTES`] of body (`truncated` says the rest was cut), tokens redacted. A 4xx or
/// 5xx is an answer like any other: the caller's to read.
#[derive(Debug)]
pub struct ProviderAnswer {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    /// The body as text (invalid UTF-8 replaced).
    pub body: String,
    pub truncated: bool,
}

/// No answer from the provider. The text is safe to show; the source (without the URL) is for
/// the logs.
#[derive(Debug, thiserror::Error)]
pub enum Unreachable {
    #[error("the provider did not answer in time")]
    TimedOut(#[source] reqwest::Error),
    #[error("could not reach the provider")]
    NoConnection(#[source] reqwest::Error),
    #[error("the provider's answer was interrupted")]
    Interrupted(#[source] reqwest::Error),
}

/// Sends `request` to `url` with `token`; the answer is redacted of `token` and of `earlier`
/// (the token the provider refused before this retry, which an echo may still carry).
pub(super) async fn send(
    http: &reqwest::Client,
    provider: &ProviderConfig,
    request: &ApiRequest<'_>,
    url: Url,
    token: &SecretString,
    earlier: Option<&SecretString>,
) -> Result<ProviderAnswer, Unreachable> {
    // The token, or an API key where the provider's entry says how it is sent.
    let builder = http.request(request.method().clone(), url);
    let mut builder = provider.with_credential(builder, token);
    if let Some(agent) = &provider.user_agent {
        builder = builder.header(reqwest::header::USER_AGENT, agent);
    }
    for (name, value) in &provider.api_headers {
        builder = builder.header(name, value);
    }
    if let Some(accept) = request.accept() {
        builder = builder.header(reqwest::header::ACCEPT, accept);
    }
    match request.body() {
        Some(Body::Json(value)) => builder = builder.json(value),
        Some(Body::Raw { content_type, bytes }) => {
            if let Some(content_type) = content_type {
                builder = builder.header(reqwest::header::CONTENT_TYPE, *content_type);
            }
            builder = builder.body(bytes.clone());
        }
        None => {}
    }
    // Without the URL: it is ours, but it carries the caller's query, which is not the logs'.
    let mut response = builder.send().await.map_err(|e| {
        if e.is_timeout() { Unreachable::TimedOut(e.without_url()) } else { Unreachable::NoConnection(e.without_url()) }
    })?;
    let secrets = Secrets { sent: token, earlier };
    let status = response.status().as_u16();
    let headers: BTreeMap<String, String> =
        forwarded_headers(response.headers()).into_iter().map(|(k, v)| (k, secrets.redact(&v))).collect();
    // Read a little past the limit so a token straddling the cut is still redacted whole.
    let read_limit = MAX_BODY_BYTES + secrets.longest();
    let mut bytes = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response.chunk().await.map_err(|e| Unreachable::Interrupted(e.without_url()))? {
        let room = read_limit.saturating_sub(bytes.len());
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        bytes.extend_from_slice(&chunk);
    }
    let mut text = secrets.redact(&String::from_utf8_lossy(&bytes));
    if text.len() > MAX_BODY_BYTES {
        let mut cut = MAX_BODY_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        truncated = true;
    }
    Ok(ProviderAnswer { status, headers, body: text, truncated })
}

fn forwarded_headers(headers: &reqwest::header::HeaderMap) -> BTreeMap<String, String> {
    headers
        .iter()
        .filter(|(name, _)| {
            let name = name.as_str();
            FORWARDED_HEADERS.contains(&name) || FORWARDED_PREFIXES.iter().any(|p| name.starts_with(p))
        })
        .filter_map(|(name, value)| value.to_str().ok().map(|v| (name.as_str().to_owned(), v.to_owned())))
        .collect()
}

/// The tokens one exchange must not hand back.
struct Secrets<'a> {
    sent: &'a SecretString,
    earlier: Option<&'a SecretString>,
}

impl Secrets<'_> {
    fn each(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.sent).chain(self.earlier).map(|s| s.expose_secret())
    }

    fn longest(&self) -> usize {
        self.each().map(str::len).max().unwrap_or(0)
    }

    /// Shorter values are left alone: replacing a few common characters would garble the
    /// answer and hide nothing (no provider issues tokens that short).
    fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in self.each().filter(|s| s.len() >= 8) {
            if text.contains(secret) {
                text = text.replace(secret, "[redacted]");
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tokens_are_redacted_from_echoed_text() {
        let sent = SecretString::from("tok_abcdefgh123".to_string());
        let refused = SecretString::from("tok_old_9876543".to_string());
        let secrets = Secrets { sent: &sent, earlier: Some(&refused) };
        assert_eq!(
            secrets.redact("{\"auth\":\"Bearer tok_abcdefgh123\",\"was\":\"tok_old_9876543\"}"),
            "{\"auth\":\"Bearer [redacted]\",\"was\":\"[redacted]\"}"
        );
        assert_eq!(secrets.longest(), 15);
    }
}
