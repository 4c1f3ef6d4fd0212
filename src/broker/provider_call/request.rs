//! What a face asks a provider's API for, checked before any token is looked at: one of six
//! methods, a path that stays under the API base, query values that are scalars, no body on
//! GET or HEAD. A request refused here never costs a token read, let alone a refresh.
//!
//! The path is resolved under the API base and cannot leave it (no `..` segments, even
//! percent-encoded; no scheme, authority or backslash), so a tool cannot turn the broker into a
//! way to send the user's token elsewhere.

use reqwest::Method;
use url::Url;

use crate::config::ProviderConfig;

/// A request the broker will not send. The text is safe to show (it names no value).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("method must be one of GET, POST, PUT, PATCH, DELETE, HEAD")]
    BadMethod,
    #[error("path must be relative to the provider's API (no scheme, host, '..', '\\' or '#')")]
    BadPath,
    #[error("query values must be strings, numbers or booleans")]
    BadQuery,
    #[error("a body is not allowed with {0}")]
    BodyNotAllowed(Method),
}

/// One of the methods the broker forwards (parsed at the edge: a face holds one only after
/// [`ApiMethod::parse`] accepted it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiMethod(Method);

impl ApiMethod {
    /// GET, POST, PUT, PATCH, DELETE or HEAD, in any case.
    pub fn parse(method: &str) -> Result<Self, RequestError> {
        let method = match method.to_ascii_uppercase().as_str() {
            "GET" => Method::GET,
            "POST" => Method::POST,
            "PUT" => Method::PUT,
            "PATCH" => Method::PATCH,
            "DELETE" => Method::DELETE,
            "HEAD" => Method::HEAD,
            _ => return Err(RequestError::BadMethod),
        };
        Ok(Self(method))
    }

    pub fn as_method(&self) -> &Method {
        &self.0
    }
}

/// The query string: values from a tool's JSON object (encoded here), or a service's raw query
/// string (forwarded as it came).
#[derive(Clone, Copy)]
pub enum Query<'a> {
    None,
    Values(&'a serde_json::Map<String, serde_json::Value>),
    Raw(&'a str),
}

/// A request body to forward: JSON from a tool, or raw bytes with their type from the proxy.
/// Both are held in full, so the request can be sent again after a 401 and a refresh.
#[derive(Clone)]
pub enum Body<'a> {
    Json(&'a serde_json::Value),
    Raw { content_type: Option<&'a str>, bytes: bytes::Bytes },
}

/// A request that passed every check that needs no token; [`super::call`] sends it.
pub struct ApiRequest<'a> {
    method: ApiMethod,
    path: &'a str,
    query: Query<'a>,
    body: Option<Body<'a>>,
    accept: Option<&'a str>,
    /// Under the provider's own API base, where every grant without its own goes.
    url: Url,
}

impl<'a> ApiRequest<'a> {
    /// `path` and `query` under `provider`'s API base, and `body` if `method` may carry one.
    pub fn new(
        provider: &ProviderConfig,
        method: ApiMethod,
        path: &'a str,
        query: Query<'a>,
        body: Option<Body<'a>>,
    ) -> Result<Self, RequestError> {
        let url = url_under(&provider.api_base_url, path, query)?;
        if body.is_some() && (method.0 == Method::GET || method.0 == Method::HEAD) {
            return Err(RequestError::BodyNotAllowed(method.0));
        }
        Ok(Self { method, path, query, body, accept: None, url })
    }

    /// The `Accept` header to send (none by default).
    pub fn accepting(self, accept: Option<&'a str>) -> Self {
        Self { accept, ..self }
    }

    pub fn method(&self) -> &Method {
        self.method.as_method()
    }

    pub(super) fn body(&self) -> Option<&Body<'a>> {
        self.body.as_ref()
    }

    pub(super) fn accept(&self) -> Option<&'a str> {
        self.accept
    }

    /// The URL under a grant's own API base, with the same checks; under the provider's when
    /// `base` is `None`.
    pub(super) fn url_under(&self, base: Option<&Url>) -> Result<Url, RequestError> {
        match base {
            None => Ok(self.url.clone()),
            Some(base) => url_under(base, self.path, self.query),
        }
    }
}

fn url_under(base: &Url, path: &str, query: Query<'_>) -> Result<Url, RequestError> {
    let mut url = resolve_path(base, path)?;
    match query {
        Query::None => {}
        Query::Values(values) => apply_query(&mut url, values)?,
        Query::Raw(raw) => url.set_query(Some(raw).filter(|q| !q.is_empty())),
    }
    Ok(url)
}

/// `base` ends with '/'. Returns a URL that is `base` plus the path, or `BadPath`.
///
/// A path is refused if any of its decodings — the path as sent, once percent-decoded, and
/// again, and so on (`%252e` is `%2e` is `.`) — holds a dot segment, also one disguised with a
/// `;` parameter (`..;`, which some servers strip); a backslash; a control character; or bytes
/// that are not UTF-8 (overlong forms such as `%c0%ae`). A server behind the API base that
/// normalises any of these would otherwise receive the user's token on a path outside it.
fn resolve_path(base: &Url, path: &str) -> Result<Url, RequestError> {
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

fn apply_query(url: &mut Url, query: &serde_json::Map<String, serde_json::Value>) -> Result<(), RequestError> {
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
        apply_query(&mut url, query.as_object().unwrap()).unwrap();
        assert_eq!(url.query(), Some("all=true&n=2&q=a+b%26c"));
        let bad = serde_json::json!({"x": {"y": 1}});
        assert_eq!(apply_query(&mut base(), bad.as_object().unwrap()), Err(RequestError::BadQuery));
    }

    #[test]
    fn a_raw_query_is_forwarded_as_it_came_and_an_empty_one_dropped() {
        let raw = url_under(&base(), "search", Query::Raw("q=a%20b&x")).unwrap();
        assert_eq!(raw.as_str(), "https://api.example.com/v1/search?q=a%20b&x");
        assert_eq!(url_under(&base(), "search", Query::Raw("")).unwrap().query(), None);
    }

    #[test]
    fn methods_are_checked() {
        assert_eq!(ApiMethod::parse("get").unwrap().as_method(), Method::GET);
        assert_eq!(ApiMethod::parse("TRACE"), Err(RequestError::BadMethod));
    }
}
