//! Cross-site request forgery defences for our forms.
//!
//! - Signed-in forms (consent, sign-out) carry the browser session's own random `csrf_token`,
//!   which a cross-site page cannot read; compared in constant time.
//! - The sign-in form has no session yet, so it uses a double-submit cookie: a random value in the
//!   `oauth_broker_login_csrf` cookie (`__Host-` prefixed over https) and the same value in a
//!   hidden field. A cross-site form can send the cookie (SameSite=Lax does not cover every case)
//!   but cannot know its value to put in the field. This stops login CSRF (signing a victim's
//!   browser into the attacker's account, which would then bind the victim's provider tokens to
//!   the attacker).

use axum::http::{HeaderMap, HeaderValue};

use crate::crypto::{constant_time_eq, random_token};
use crate::identity::browser::{BrowserSession, read_cookie, set_cookie};

/// The sign-in form's double-submit cookie.
pub const LOGIN_CSRF_COOKIE: &str = "oauth_broker_login_csrf";
/// Long enough to fill in a form after a coffee.
const LOGIN_CSRF_TTL_SECONDS: i64 = 60 * 60;

/// The login CSRF value for a form: the browser's existing one, else a new one with the
/// `Set-Cookie` header that installs it (existing values are kept so two open tabs both work).
pub fn login_token(headers: &HeaderMap, secure: bool) -> (String, Option<HeaderValue>) {
    match read_cookie(headers, LOGIN_CSRF_COOKIE, secure) {
        Some(value) => (value, None),
        None => fresh_login_token(secure),
    }
}

/// A new login CSRF value and its `Set-Cookie` header.
pub fn fresh_login_token(secure: bool) -> (String, Option<HeaderValue>) {
    let value = random_token(32);
    let cookie = set_cookie(LOGIN_CSRF_COOKIE, &value, LOGIN_CSRF_TTL_SECONDS, secure);
    (value, Some(cookie))
}

/// Whether the submitted field equals the cookie (both present).
pub fn login_token_matches(headers: &HeaderMap, secure: bool, submitted: &str) -> bool {
    match read_cookie(headers, LOGIN_CSRF_COOKIE, secure) {
        Some(cookie) => !submitted.is_empty() && constant_time_eq(cookie.as_bytes(), submitted.as_bytes()),
        None => false,
    }
}

/// Whether a signed-in form carries this session's token.
pub fn session_token_matches(session: &BrowserSession, submitted: &str) -> bool {
    !submitted.is_empty() && constant_time_eq(session.csrf_token.as_bytes(), submitted.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header::COOKIE;

    fn with_cookie(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(COOKIE, HeaderValue::from_str(&format!("{LOGIN_CSRF_COOKIE}={value}")).unwrap());
        headers
    }

    #[test]
    fn login_token_is_reused_when_the_browser_has_one_and_minted_otherwise() {
        let (fresh, cookie) = login_token(&HeaderMap::new(), false);
        assert!(cookie.unwrap().to_str().unwrap().starts_with(&format!("{LOGIN_CSRF_COOKIE}={fresh};")));
        let (again, cookie) = login_token(&with_cookie(&fresh), false);
        assert_eq!(again, fresh);
        assert!(cookie.is_none());
    }

    #[test]
    fn login_token_must_match_the_cookie() {
        let value = random_token(32);
        assert!(login_token_matches(&with_cookie(&value), false, &value));
        assert!(!login_token_matches(&with_cookie(&value), false, &random_token(32)));
        assert!(!login_token_matches(&with_cookie(&value), false, ""));
        assert!(!login_token_matches(&HeaderMap::new(), false, &value));
        // Over https only the __Host- cookie counts.
        assert!(!login_token_matches(&with_cookie(&value), true, &value));
    }
}
