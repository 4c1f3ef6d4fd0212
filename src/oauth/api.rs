//! `provider_request`: one call to a provider's API with the user's token injected.
//!
//! The path is resolved under the provider's `api_base_url` and cannot leave it (no `..`
//! segments, even percent-encoded; no scheme, authority or backslash), so a tool cannot turn the
//! broker into a way to send the user's token elsewhere. Redirects are not followed. The token
//! never appears in the result: it is not echoed in headers, and any occurrence in the body is
//! replaced.

use std::collections::BTreeMap;

use reqwest::Method;
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use url::Url;

use crate::config::ProviderConfig;

/// Largest upstream body returned to the client; the rest is cut (and flagged).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Response headers worth showing a model (paging, rate limits, caching, content type).
const FORWARDED_HEADERS: &[&str] = &["content-type", "link", "location", "etag", "last-modified", "retry-after"];
const FORWARDED_PREFIXES: &[&str] = &["x-ratelimit-", "ratelimit-", "x-total-count", "x-next-page"];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("method must be one of GET, POST, PUT, PATCH, DELETE, HEAD")]
    BadMethod,
    #[error("path must be relative to the provider's API (no scheme, host, '..', '\\' or '#')")]
    BadPath,
    #[error("query values must be strings, numbers or booleans")]
    BadQuery,
    #[error("a body is not allowed with {0}")]
    BodyNotAllowed(String),
}

#[derive(Debug, Serialize)]
pub struct ApiResponse {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    /// Parsed JSON when the provider sent JSON, else the text.
    pub body: serde_json::Value,
    pub truncated: bool,
}

pub fn parse_method(method: &str) -> Result<Method, RequestError> {
    match method.to_ascii_uppercase().as_str() {
        "GET" => Ok(Method::GET),
        "POST" => Ok(Method::POST),
        "PUT" => Ok(Method::PUT),
        "PATCH" => Ok(Method::PATCH),
        "DELETE" => Ok(Method::DELETE),
        "HEAD" => Ok(Method::HEAD),
        _ => Err(RequestError::BadMethod),
    }
}

/// `base` ends with '/'. Returns a URL that is `base` plus the path, or `BadPath`.
///
/// A path is refused if any of its decodings — the path as sent, once percent-decoded, and
/// again, and so on (`%252e` is `%2e` is `.`) — holds a dot segment, also one disguised with a
/// `;` parameter (`..;`, which some servers strip); a backslash; a control character; or bytes
/// that are not UTF-8 (overlong forms such as `%c0%ae`). A server behind the API base that
/// normalises any of these would otherwise receive the user's token on a path outside it.
pub fn resolve_path(base: &Url, path: &str) -> Result<Url, RequestError> {
    let trimmed = path.trim_start_matches('/');
    let bad = path.len() > 2048
        || path.contains("://")
        || path.starts_with("//")
        || path.contains('#')
        || path.contains('?')
        || !decodings_are_safe(trimmed);
    if bad {
        return Err(RequestError::BadPath);
    }
    let url = base.join(trimmed).map_err(|_| RequestError::BadPath)?;
    let same_origin = url.scheme() == base.scheme()
        && url.host_str() == base.host_str()
        && url.port_or_known_default() == base.port_or_known_default();
    if !same_origin || !url.path().starts_with(base.path()) || url.username() != "" || url.password().is_some() {
        return Err(RequestError::BadPath);
    }
    Ok(url)
}

/// How many rounds of percent-decoding are checked; a path still changing after that is refused.
const DECODING_ROUNDS: usize = 4;

fn decodings_are_safe(path: &str) -> bool {
    let mut current = path.to_owned();
    for _ in 0..DECODING_ROUNDS {
        if current.contains('\\') || current.chars().any(char::is_control) || current.split('/').any(is_dot_segment) {
            return false;
        }
        match percent_decode(&current) {
            // A lone '%' (a literal percent sign once decoded): nothing decodes it further.
            Decoded::NotAnEscape => return true,
            // Overlong or otherwise invalid UTF-8 hides characters from the checks above.
            Decoded::NotUtf8 => return false,
            Decoded::Text(decoded) if decoded == current => return true,
            Decoded::Text(decoded) => current = decoded,
        }
    }
    false
}

/// `.` or `..`, also with `;parameters` after it (RFC 3986 §3.3 allows them in a segment).
fn is_dot_segment(segment: &str) -> bool {
    let name = segment.split(';').next().unwrap_or_default();
    name == "." || name == ".."
}

enum Decoded {
    Text(String),
    /// A '%' not followed by two hex digits.
    NotAnEscape,
    NotUtf8,
}

/// One round of percent-decoding ('+' stays '+').
fn percent_decode(value: &str) -> Decoded {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let Some(byte) = value.get(i + 1..i + 3).and_then(|hex| u8::from_str_radix(hex, 16).ok()) else {
                return Decoded::NotAnEscape;
            };
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    match String::from_utf8(out) {
        Ok(text) => Decoded::Text(text),
        Err(_) => Decoded::NotUtf8,
    }
}

pub fn apply_query(
    url: &mut Url,
    query: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<(), RequestError> {
    let Some(query) = query else { return Ok(()) };
    let mut pairs = url.query_pairs_mut();
    for (name, value) in query {
        let text = match value {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            _ => return Err(RequestError::BadQuery),
        };
        pairs.append_pair(name, &text);
    }
    drop(pairs);
    if url.query() == Some("") {
        url.set_query(None);
    }
    Ok(())
}

/// A request body to forward: JSON from a tool, or raw bytes with their type from the proxy.
/// Both are held in full, so a request can be sent again (after a 401 and a refresh).
#[derive(Clone)]
pub enum Body<'a> {
    Json(&'a serde_json::Value),
    Raw { content_type: Option<&'a str>, bytes: axum::body::Bytes },
}

/// The provider's answer with the token redacted: status, the headers worth forwarding, and at
/// most [`MAX_BODY_BYTES`] of body (`truncated` says the rest was cut).
pub struct RawResponse {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub body: String,
    pub truncated: bool,
}

/// Sends the request and shapes the answer. Transport failures are returned as `Err(text)`
/// without the URL (which is ours, but reqwest errors can be verbose).
pub async fn send(
    http: &reqwest::Client,
    provider: &ProviderConfig,
    method: Method,
    url: Url,
    token: &SecretString,
    body: Option<&serde_json::Value>,
) -> Result<ApiResponse, String> {
    let raw = fetch(http, provider, method, url, token, body.map(Body::Json), Some("application/json")).await?;
    let is_json = raw.headers.get("content-type").is_some_and(|ct| ct.contains("json"));
    let body = if is_json && !raw.truncated {
        serde_json::from_str(&raw.body).unwrap_or(serde_json::Value::String(raw.body))
    } else {
        serde_json::Value::String(raw.body)
    };
    Ok(ApiResponse { status: raw.status, headers: raw.headers, body, truncated: raw.truncated })
}

/// One request to the provider with the user's token and the provider's own API headers
/// (`user_agent`, `api_headers`); the token is redacted from everything that comes back
/// (headers and body), even where a cut would split it.
pub async fn fetch(
    http: &reqwest::Client,
    provider: &ProviderConfig,
    method: Method,
    url: Url,
    token: &SecretString,
    body: Option<Body<'_>>,
    accept: Option<&str>,
) -> Result<RawResponse, String> {
    if body.is_some() && (method == Method::GET || method == Method::HEAD) {
        return Err(RequestError::BodyNotAllowed(method.to_string()).to_string());
    }
    let mut request = http.request(method, url).bearer_auth(token.expose_secret());
    if let Some(agent) = &provider.user_agent {
        request = request.header(reqwest::header::USER_AGENT, agent);
    }
    for (name, value) in &provider.api_headers {
        request = request.header(name, value);
    }
    if let Some(accept) = accept {
        request = request.header(reqwest::header::ACCEPT, accept);
    }
    match body {
        Some(Body::Json(value)) => request = request.json(value),
        Some(Body::Raw { content_type, bytes }) => {
            if let Some(content_type) = content_type {
                request = request.header(reqwest::header::CONTENT_TYPE, content_type);
            }
            request = request.body(bytes);
        }
        None => {}
    }
    let mut response = request.send().await.map_err(|e| {
        if e.is_timeout() {
            "the provider did not answer in time".to_owned()
        } else {
            "could not reach the provider".to_owned()
        }
    })?;
    let status = response.status().as_u16();
    let headers: BTreeMap<String, String> =
        forwarded_headers(response.headers()).into_iter().map(|(k, v)| (k, redact(&v, token))).collect();
    // Read a little past the limit so a token straddling the cut is still redacted whole.
    let read_limit = MAX_BODY_BYTES + token.expose_secret().len();
    let mut bytes = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response.chunk().await.map_err(|_| "the provider's answer was interrupted".to_owned())? {
        let room = read_limit.saturating_sub(bytes.len());
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        bytes.extend_from_slice(&chunk);
    }
    let mut text = redact(&String::from_utf8_lossy(&bytes), token);
    if text.len() > MAX_BODY_BYTES {
        let mut cut = MAX_BODY_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        truncated = true;
    }
    Ok(RawResponse { status, headers, body: text, truncated })
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

/// An API that echoes the request (debug endpoints do) must not leak the token to the client.
fn redact(text: &str, token: &SecretString) -> String {
    let secret = token.expose_secret();
    if secret.len() >= 8 && text.contains(secret) { text.replace(secret, "[redacted]") } else { text.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Url {
        Url::parse("https://api.example.com/v1/").unwrap()
    }

    #[test]
    fn paths_resolve_under_the_api_base() {
        assert_eq!(resolve_path(&base(), "/user/repos").unwrap().as_str(), "https://api.example.com/v1/user/repos");
        assert_eq!(resolve_path(&base(), "me").unwrap().as_str(), "https://api.example.com/v1/me");
        // Ordinary encodings, parameters and literal percent signs still pass.
        for fine in ["search/a%20b", "search/a+b", "discount/100%25", "files/a;rev=2/x", "files/%E2%9C%93", "..x/y.."] {
            assert!(resolve_path(&base(), fine).is_ok(), "{fine:?} is an ordinary path");
        }
    }

    #[test]
    fn paths_that_try_to_escape_the_api_base_are_refused() {
        for evil in [
            "../admin",
            "/v1/../../etc",
            "%2e%2e/admin",
            "a/%2E%2E/%2e%2e/x",
            "//evil.example/steal",
            "https://evil.example/",
            "..\\admin",
            "a%5c..%5cb",
            "me?x=1",
            "me#frag",
            "a/./b",
            "/..;/token",
            "a/..;x=1/b",
            "/%252e%252e/token",
            "%25252e%25252e/x",
            "/%c0%ae%c0%ae/token",
            "%2e%2e%3b/x",
            "a%00b",
            "%5c..",
        ] {
            assert_eq!(resolve_path(&base(), evil), Err(RequestError::BadPath), "{evil:?} should be refused");
        }
    }

    #[test]
    fn query_values_are_encoded_and_objects_refused() {
        let mut url = base();
        let query = serde_json::json!({"q": "a b&c", "n": 2, "all": true});
        apply_query(&mut url, query.as_object()).unwrap();
        assert_eq!(url.query(), Some("all=true&n=2&q=a+b%26c"));
        let bad = serde_json::json!({"x": {"y": 1}});
        assert_eq!(apply_query(&mut base(), bad.as_object()), Err(RequestError::BadQuery));
    }

    #[test]
    fn methods_are_checked() {
        assert_eq!(parse_method("get").unwrap(), Method::GET);
        assert_eq!(parse_method("TRACE"), Err(RequestError::BadMethod));
    }

    #[test]
    fn the_token_is_redacted_from_echoed_bodies() {
        let token = SecretString::from("tok_abcdefgh123".to_string());
        assert_eq!(redact("{\"auth\":\"Bearer tok_abcdefgh123\"}", &token), "{\"auth\":\"Bearer [redacted]\"}");
    }
}
