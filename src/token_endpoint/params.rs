//! Request parameters parsed strictly, for authorize queries, consent/approve forms and the
//! token and revocation bodies. RFC 6749 §3.1/§3.2: a parameter sent without a value counts as
//! omitted, and a parameter must not appear more than once — serde's map extractors would
//! silently keep one of two values, so duplicates are recorded and refused by the handlers.

use std::collections::{BTreeMap, BTreeSet};

use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;

#[derive(Debug, Default)]
pub struct Params {
    values: BTreeMap<String, String>,
    duplicated: BTreeSet<String>,
}

impl Params {
    /// Parses `application/x-www-form-urlencoded` text (a query string or a form body).
    pub fn parse(input: &[u8]) -> Self {
        let mut params = Self::default();
        for (name, value) in url::form_urlencoded::parse(input) {
            if value.is_empty() {
                continue;
            }
            if params.values.contains_key(name.as_ref()) {
                params.duplicated.insert(name.into_owned());
            } else {
                params.values.insert(name.into_owned(), value.into_owned());
            }
        }
        params
    }

    /// The value of a parameter that appeared exactly once; `None` when absent or repeated.
    pub fn get(&self, name: &str) -> Option<&str> {
        if self.duplicated.contains(name) { None } else { self.values.get(name).map(String::as_str) }
    }

    pub fn is_duplicated(&self, name: &str) -> bool {
        self.duplicated.contains(name)
    }

    pub fn has_duplicates(&self) -> bool {
        !self.duplicated.is_empty()
    }
}

/// True when the body is declared with the media type `essence` (any parameters).
pub fn has_content_type(headers: &HeaderMap, essence: &str) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|found| found.trim().eq_ignore_ascii_case(essence))
}

/// True for `application/x-www-form-urlencoded` bodies (any charset parameter).
pub fn is_form(headers: &HeaderMap) -> bool {
    has_content_type(headers, "application/x-www-form-urlencoded")
}

/// Decodes one `application/x-www-form-urlencoded` component ('+' is a space, `%XX` a byte).
/// Strict: a malformed escape or invalid UTF-8 is an error, not replaced.
pub fn decode_form_component(input: &str) -> Option<String> {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = input.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_values_count_as_omitted_and_repeats_are_flagged() {
        let p = Params::parse(b"a=1&b=&c=x+y%21&a=2&b=3");
        assert_eq!(p.get("a"), None, "a repeated parameter has no single value");
        assert!(p.is_duplicated("a"));
        assert_eq!(p.get("b"), Some("3"), "the empty b was treated as omitted");
        assert_eq!(p.get("c"), Some("x y!"));
        assert!(p.has_duplicates());
        assert!(!Params::parse(b"a=1&b=2").has_duplicates());
    }

    #[test]
    fn content_types_are_matched_on_their_essence() {
        let mut h = HeaderMap::new();
        assert!(!is_form(&h));
        h.insert(CONTENT_TYPE, "Application/X-WWW-Form-Urlencoded; charset=UTF-8".parse().unwrap());
        assert!(is_form(&h));
        h.insert(CONTENT_TYPE, "application/json".parse().unwrap());
        assert!(has_content_type(&h, "application/json"));
        assert!(!is_form(&h));
    }

    #[test]
    fn form_components_decode_strictly() {
        assert_eq!(decode_form_component("a+b%3Ac%25").as_deref(), Some("a b:c%"));
        assert_eq!(decode_form_component("%zz"), None);
        assert_eq!(decode_form_component("%4"), None);
        assert_eq!(decode_form_component("%FF"), None, "not UTF-8");
        assert_eq!(decode_form_component("%C3%A9").as_deref(), Some("é"));
    }
}
