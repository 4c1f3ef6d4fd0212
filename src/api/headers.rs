//! Reading the token API's own request headers so that a caller's mistake is a 400 naming the
//! header, never a silent "absent" (an `X-Account: zürich` used to be dropped, and
//! the call went out with the user's *default* account's token).
//!
//! - Every header the API reads must be visible ASCII (RFC 9110 §5.5 field values; obs-text is
//!   refused, not guessed at) and sent at most once.
//! - `X-Account` carries the account name **percent-encoded as UTF-8** (RFC 3986 §2.1), the way
//!   a URL carries it: `zürich` is `X-Account: z%C3%BCrich`; ASCII other than `%` may be sent
//!   as is, and a `%` in a name is `%25`. A malformed escape or bytes that are not UTF-8 are
//!   refused. This is documented in `docs/token-api.md`.

use axum::http::HeaderMap;

use crate::problem::Problem;

/// The header's value, `None` when absent; 400 when it is sent twice or is not visible ASCII.
pub fn text<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, Problem> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else { return Ok(None) };
    if values.next().is_some() {
        return Err(Problem::invalid_request(format!("send the {} header once", shown(name))));
    }
    value.to_str().map(Some).map_err(|_| {
        Problem::invalid_request(format!(
            "the {} header must be visible ASCII; percent-encode anything else as UTF-8 (e.g. z%C3%BCrich)",
            shown(name)
        ))
    })
}

/// `X-Account`, decoded: `None` when absent; 400 naming the header when it cannot be decoded.
pub fn account(headers: &HeaderMap, name: &str) -> Result<Option<String>, Problem> {
    let Some(raw) = text(headers, name)? else { return Ok(None) };
    percent_decode(raw).map(Some).ok_or_else(|| {
        Problem::invalid_request(format!(
            "the {} header must be the account name percent-encoded as UTF-8 (e.g. z%C3%BCrich for zürich)",
            shown(name)
        ))
    })
}

/// RFC 3986 §2.1 percent-decoding, strict: every `%` starts two hex digits, and the bytes are
/// UTF-8. `None` otherwise.
pub fn percent_decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let high = char::from(hex[0]).to_digit(16)?;
            let low = char::from(hex[1]).to_digit(16)?;
            out.push(u8::try_from(high * 16 + low).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The header's name as callers write it (`X-Account`), for messages.
fn shown(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn percent_encoded_utf8_decodes_and_plain_ascii_is_itself() {
        assert_eq!(percent_decode("z%C3%BCrich").as_deref(), Some("zürich"));
        assert_eq!(percent_decode("z%c3%bcrich").as_deref(), Some("zürich"));
        assert_eq!(percent_decode("work account").as_deref(), Some("work account"));
        assert_eq!(percent_decode("100%25").as_deref(), Some("100%"));
        assert_eq!(percent_decode("").as_deref(), Some(""));
    }

    #[test]
    fn malformed_escapes_and_bytes_that_are_not_utf8_are_refused() {
        for bad in ["100%", "%G1", "%C3", "%FF", "a%2", "%%"] {
            assert_eq!(percent_decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_raw_non_ascii_or_repeated_header_is_a_caller_mistake_naming_the_header() {
        let mut headers = HeaderMap::new();
        headers.insert("x-account", HeaderValue::from_bytes("zürich".as_bytes()).unwrap());
        let refused = account(&headers, "x-account").unwrap_err();
        assert_eq!((refused.status.as_u16(), refused.code), (400, "invalid_request"));
        assert!(refused.detail.contains("X-Account"), "{}", refused.detail);

        let mut twice = HeaderMap::new();
        twice.append("x-account", HeaderValue::from_static("a"));
        twice.append("x-account", HeaderValue::from_static("b"));
        assert!(account(&twice, "x-account").unwrap_err().detail.contains("once"));

        let mut fine = HeaderMap::new();
        fine.insert("x-account", HeaderValue::from_static("z%C3%BCrich"));
        assert_eq!(account(&fine, "x-account").unwrap().as_deref(), Some("zürich"));
        assert_eq!(account(&HeaderMap::new(), "x-account").unwrap(), None);
    }
}
