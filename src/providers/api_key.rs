//! Providers without OAuth: the user pastes an API key or personal access token on the broker's
//! own connect page (`kind = "api_key"` in the catalogue). This module holds what the catalogue
//! says about such a key — how it is sent, how it is checked, where the user makes one — and
//! the two things the broker does with it: put it on a request, and ask the provider whether
//! it is good.
//!
//! ```text
//! key_header = "Authorization", key_scheme = "Bearer"  → Authorization: Bearer <key>
//! key_header = "X-API-Key"                              → X-API-Key: <key>
//! key_basic = "username"                                → Authorization: Basic base64(<key>:)
//! key_basic = "password", key_basic_user = "api"        → Authorization: Basic base64(api:<key>)
//! validate = "GET user" (+ validate_statuses)           → a test request under api_base_url
//! ```
//!
//! A key is a secret like an access token: it is only ever in a header, never a URL, a log line
//! or an error message, and a provider's refusal is shown only after the key is taken out of it.

use reqwest::header::{HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use url::Url;

/// The API-key fields of a catalogue entry or an operator's table, as given
/// ([`super::catalogue`] fills this from its `ProviderFields`).
#[derive(Debug, Default, Clone, Copy)]
pub struct KeyFields<'a> {
    pub kind: Option<&'a str>,
    pub key_header: Option<&'a str>,
    pub key_scheme: Option<&'a str>,
    pub key_basic: Option<&'a str>,
    pub key_basic_user: Option<&'a str>,
    pub key_url: Option<&'a str>,
    pub key_prefixes: Option<&'a [String]>,
    pub validate: Option<&'a str>,
    pub validate_statuses: Option<&'a [u16]>,
}

/// Headers a key may not be sent in: they would reshape the request or reach a cookie jar.
const FORBIDDEN_KEY_HEADERS: [&str; 7] =
    ["cookie", "host", "content-length", "content-type", "transfer-encoding", "connection", "proxy-authorization"];

/// How the key travels on every call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySend {
    /// `name: [scheme ]key`.
    Header { name: HeaderName, scheme: Option<String> },
    /// HTTP Basic (RFC 7617) with the key as the user name and an empty password (Stripe).
    BasicUser,
    /// HTTP Basic with a fixed user name and the key as the password (Mailgun: `api`).
    BasicPassword { user: String },
}

/// A test request that tells a good key from a bad one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validation {
    pub method: reqwest::Method,
    /// Relative to the provider's API base.
    pub path: String,
    /// Statuses that mean "this key is good"; empty means any 2xx.
    pub valid_statuses: Vec<u16>,
}

/// What the catalogue (or the operator) says about a provider's keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeySpec {
    pub send: KeySend,
    pub validation: Option<Validation>,
    /// Where the user creates a key, linked from the connect page.
    pub key_url: Option<Url>,
    /// How the provider's keys begin (`ghp_`, `sk-`): a hint on the page, never a reason to
    /// refuse a key the provider accepts.
    pub key_prefixes: Vec<String>,
}

type FieldError = (String, String);

fn bad(field: &str, message: impl Into<String>) -> FieldError {
    (field.to_owned(), message.into())
}

impl ApiKeySpec {
    /// The entry's API-key fields, checked; `None` for an OAuth provider (which may not carry
    /// them).
    pub fn from_fields(
        f: &KeyFields<'_>,
        check_url: impl Fn(&str, &str) -> Result<Url, FieldError>,
    ) -> Result<Option<Self>, FieldError> {
        let api_key_fields = [
            ("key_header", f.key_header.is_some()),
            ("key_scheme", f.key_scheme.is_some()),
            ("key_basic", f.key_basic.is_some()),
            ("key_basic_user", f.key_basic_user.is_some()),
            ("key_url", f.key_url.is_some()),
            ("key_prefixes", f.key_prefixes.is_some()),
            ("validate", f.validate.is_some()),
            ("validate_statuses", f.validate_statuses.is_some()),
        ];
        match f.kind {
            None | Some("oauth2") => {
                if let Some((field, _)) = api_key_fields.iter().find(|(_, given)| *given) {
                    return Err(bad(field, "only for kind = \"api_key\""));
                }
                return Ok(None);
            }
            Some("api_key") => {}
            Some(other) => return Err(bad("kind", format!("unknown kind {other:?} (oauth2 or api_key)"))),
        }
        let send = match (f.key_basic, f.key_header) {
            (Some(_), Some(_)) => return Err(bad("key_basic", "give key_header or key_basic, not both")),
            (Some("username"), None) => KeySend::BasicUser,
            (Some("password"), None) => {
                KeySend::BasicPassword { user: f.key_basic_user.unwrap_or_default().to_owned() }
            }
            (Some(other), None) => {
                return Err(bad("key_basic", format!("unknown value {other:?} (username or password)")));
            }
            (None, header) => {
                let raw = header.unwrap_or("Authorization");
                let name = HeaderName::try_from(raw).map_err(|_| bad("key_header", "not a header name"))?;
                if FORBIDDEN_KEY_HEADERS.contains(&name.as_str()) {
                    return Err(bad("key_header", format!("{raw} cannot carry a key")));
                }
                let scheme = f.key_scheme.filter(|s| !s.is_empty()).map(str::to_owned);
                if let Some(scheme) = &scheme
                    && !scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                {
                    return Err(bad("key_scheme", "must be one word such as Bearer or token"));
                }
                KeySend::Header { name, scheme }
            }
        };
        if f.key_basic_user.is_some() && !matches!(send, KeySend::BasicPassword { .. }) {
            return Err(bad("key_basic_user", "only with key_basic = \"password\""));
        }
        if f.key_scheme.is_some() && !matches!(send, KeySend::Header { .. }) {
            return Err(bad("key_scheme", "only with key_header"));
        }
        let validation = match f.validate {
            None => {
                if f.validate_statuses.is_some() {
                    return Err(bad("validate_statuses", "only with validate"));
                }
                None
            }
            Some(text) => Some(parse_validation(text, f.validate_statuses.unwrap_or_default().to_vec())?),
        };
        let key_url = f.key_url.map(|u| check_url("key_url", u)).transpose()?;
        let key_prefixes = f.key_prefixes.unwrap_or_default().to_vec();
        if key_prefixes.iter().any(|p| p.is_empty() || p.len() > 32 || !p.bytes().all(|b| (0x21..0x7f).contains(&b))) {
            return Err(bad("key_prefixes", "each must be 1-32 printable ASCII characters"));
        }
        Ok(Some(ApiKeySpec { send, validation, key_url, key_prefixes }))
    }

    /// `builder` with the key on it, the way this provider wants it.
    pub fn apply(&self, builder: reqwest::RequestBuilder, key: &SecretString) -> reqwest::RequestBuilder {
        match &self.send {
            KeySend::Header { name, scheme } => {
                let value = match scheme {
                    Some(scheme) => format!("{scheme} {}", key.expose_secret()),
                    None => key.expose_secret().to_owned(),
                };
                match HeaderValue::from_str(&value) {
                    Ok(mut value) => {
                        value.set_sensitive(true);
                        builder.header(name, value)
                    }
                    // Checked when the key was entered ([`check_key`]); an unusable stored key
                    // goes without it and the provider answers 401.
                    Err(_) => builder,
                }
            }
            KeySend::BasicUser => builder.basic_auth(key.expose_secret(), None::<&str>),
            KeySend::BasicPassword { user } => builder.basic_auth(user, Some(key.expose_secret())),
        }
    }

    /// How the key is sent, in words a service reads (the token API's `send_as`).
    pub fn describe(&self) -> (String, Option<String>) {
        match &self.send {
            KeySend::Header { name, scheme } => (name.as_str().to_owned(), scheme.clone()),
            KeySend::BasicUser => ("authorization".into(), Some("Basic (key as user name)".into())),
            KeySend::BasicPassword { user } => {
                ("authorization".into(), Some(format!("Basic (user name {user:?}, key as password)")))
            }
        }
    }

    /// Whether `key` looks like this provider's keys (only a hint: `true` when none is known).
    pub fn looks_right(&self, key: &str) -> bool {
        self.key_prefixes.is_empty() || self.key_prefixes.iter().any(|p| key.starts_with(p.as_str()))
    }
}

/// `"GET user"` → method and path.
fn parse_validation(text: &str, valid_statuses: Vec<u16>) -> Result<Validation, FieldError> {
    let (method, path) =
        text.trim().split_once(' ').ok_or_else(|| bad("validate", "must be \"METHOD path\", such as \"GET user\""))?;
    let method = match method {
        "GET" => reqwest::Method::GET,
        "HEAD" => reqwest::Method::HEAD,
        "POST" => reqwest::Method::POST,
        _ => return Err(bad("validate", "the method must be GET, HEAD or POST")),
    };
    let path = path.trim().trim_start_matches('/').to_owned();
    if path.contains("..") || path.contains("://") || path.contains('#') || path.contains(' ') {
        return Err(bad("validate", "the path must be relative to api_base_url"));
    }
    if valid_statuses.iter().any(|s| !(200..500).contains(s)) {
        return Err(bad("validate_statuses", "each must be a status from 200 to 499"));
    }
    Ok(Validation { method, path, valid_statuses })
}

/// Why a key typed on the page cannot even be tried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyFormatError {
    #[error("the key is empty")]
    Empty,
    #[error("the key is longer than 4096 characters")]
    TooLong,
    #[error("the key has spaces or characters a key never has")]
    BadCharacters,
}

/// The key as typed, trimmed of the whitespace a paste brings along, if it can be sent in a
/// header at all.
pub fn check_key(raw: &str) -> Result<SecretString, KeyFormatError> {
    let key = raw.trim();
    if key.is_empty() {
        return Err(KeyFormatError::Empty);
    }
    if key.len() > 4096 {
        return Err(KeyFormatError::TooLong);
    }
    if !key.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err(KeyFormatError::BadCharacters);
    }
    Ok(SecretString::from(key.to_owned()))
}

/// What the user sees of a stored key: its last four characters.
pub fn hint(key: &SecretString) -> String {
    let key = key.expose_secret();
    let tail: String = key.chars().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
    if key.chars().count() <= 8 { "…".into() } else { format!("…{tail}") }
}

/// The provider's reason for refusing a key, from its answer: the usual error fields of a JSON
/// body (`error_description`, `message`, `error.message`, `errors[0].message`, a string
/// `error`), with the key taken out, reduced to printable text and cut at 200 characters.
pub fn refusal_reason(status: u16, body: &[u8], key: &SecretString) -> String {
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let pick = |v: &serde_json::Value| -> Option<String> {
        let paths: [&[&str]; 5] =
            [&["error_description"], &["message"], &["error", "message"], &["errors", "0", "message"], &["error"]];
        paths.iter().find_map(|path| {
            let mut at = v;
            for step in *path {
                at = match step.parse::<usize>() {
                    Ok(i) => at.get(i)?,
                    Err(_) => at.get(*step)?,
                };
            }
            at.as_str().map(str::to_owned)
        })
    };
    let text = json.as_ref().and_then(pick).unwrap_or_default();
    let secret = key.expose_secret();
    let text = if secret.len() >= 4 { text.replace(secret, "[your key]") } else { text };
    let cleaned: String =
        text.chars().map(|c| if c.is_control() { ' ' } else { c }).take(200).collect::<String>().trim().to_owned();
    if cleaned.is_empty() { format!("the provider answered {status}") } else { format!("{cleaned} ({status})") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> SecretString {
        SecretString::from(s.to_owned())
    }

    #[test]
    fn a_refusal_reason_never_carries_the_key() {
        let body = br#"{"error":{"message":"Incorrect API key provided: sk-secret-123456. See docs."}}"#;
        let reason = refusal_reason(401, body, &key("sk-secret-123456"));
        assert_eq!(reason, "Incorrect API key provided: [your key]. See docs. (401)");
        assert_eq!(refusal_reason(403, b"<html>", &key("k")), "the provider answered 403");
        assert_eq!(
            refusal_reason(401, br#"{"error":"invalid_key","error_description":"unknown\nkey"}"#, &key("kkkk")),
            "unknown key (401)"
        );
    }

    #[test]
    fn a_key_with_spaces_or_nothing_in_it_is_refused_before_any_request() {
        assert_eq!(check_key("   ").unwrap_err(), KeyFormatError::Empty);
        assert_eq!(check_key("a b").unwrap_err(), KeyFormatError::BadCharacters);
        assert_eq!(check_key("kéy").unwrap_err(), KeyFormatError::BadCharacters);
        assert_eq!(check_key(&"a".repeat(5000)).unwrap_err(), KeyFormatError::TooLong);
        assert_eq!(check_key(" ghp_abc \n").unwrap().expose_secret(), "ghp_abc");
    }

    #[test]
    fn the_hint_shows_only_the_last_four_characters_of_a_long_key() {
        assert_eq!(hint(&key("ghp_0123456789abcd")), "…abcd");
        assert_eq!(hint(&key("short")), "…");
    }

    #[test]
    fn a_validation_is_a_method_and_a_relative_path() {
        let v = parse_validation("GET /user", vec![]).unwrap();
        assert_eq!((v.method, v.path.as_str()), (reqwest::Method::GET, "user"));
        assert!(parse_validation("DELETE user", vec![]).is_err());
        assert!(parse_validation("GET ../admin", vec![]).is_err());
        assert!(parse_validation("GET https://evil.example/x", vec![]).is_err());
        assert!(parse_validation("GET user", vec![500]).is_err());
    }
}
