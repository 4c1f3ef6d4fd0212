//! Browser sign-in sessions.
//!
//! A session is a random 32-byte value in an `HttpOnly; SameSite=Lax` cookie; the database holds
//! only its SHA-256 (a database reader cannot ride a session) and a per-session CSRF token that
//! the consent and sign-out forms carry. With an https public URL the cookie is
//! `__Host-oauth_broker_session` (`Secure`, `Path=/`, no `Domain`: a sibling subdomain cannot
//! plant or overwrite it). Every sign-in mints a new value, never reusing one sent by the browser
//! (session fixation). Sessions last 12 hours.
//!
//! [`OptionalBrowserSession`] and [`BrowserSession`] are extractors; the latter refuses a browser
//! that is not signed in with [`BrowserSessionError::SignInRequired`], which the pages answer with a
//! redirect to the sign-in form.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method};
use axum_extra::extract::cookie::CookieJar;

use crate::crypto::{random_token, sha256_hex};
use crate::identity::context::IdentityContext;
use crate::store::users::User;
use crate::store::{StoreError, StoreResult};

/// The session cookie's name over plain http (development).
pub const SESSION_COOKIE: &str = "oauth_broker_session";
/// How long a sign-in lasts.
pub const SESSION_TTL_SECONDS: i64 = 12 * 60 * 60;
/// 32 random bytes, base64url without padding.
const SESSION_VALUE_LEN: usize = 43;

/// Why a request has no browser session to act for.
#[derive(Debug, thiserror::Error)]
pub enum BrowserSessionError {
    /// The browser is not signed in; after signing in it should come back to `next` (a local
    /// path, checked again by [`super::next::safe_next`] before it is followed).
    #[error("the browser is not signed in")]
    SignInRequired { next: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A signed-in browser.
#[derive(Clone)]
pub struct BrowserSession {
    pub user: User,
    /// `sha256_hex` of the cookie value; what the database and authorization rows hold.
    pub id_hash: String,
    /// Must come back in every state-changing form this browser submits.
    pub csrf_token: String,
}

impl std::fmt::Debug for BrowserSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserSession").field("user_id", &self.user.id).finish_non_exhaustive()
    }
}

impl BrowserSession {
    /// What pages call the user: the local username, else the subject.
    pub fn display_name(&self) -> &str {
        self.user.username.as_deref().or(self.user.display_name.as_deref()).unwrap_or(&self.user.subject)
    }
}

/// `__Host-<name>` over https, `<name>` otherwise. Used for every cookie we set.
pub fn cookie_name(base: &str, secure: bool) -> String {
    if secure { format!("__Host-{base}") } else { base.to_owned() }
}

/// A `Set-Cookie` value: always `HttpOnly; SameSite=Lax; Path=/`, plus `Secure` over https.
/// `max_age` 0 deletes the cookie. Values are base64url, so they need no quoting.
pub fn set_cookie(base: &str, value: &str, max_age: i64, secure: bool) -> HeaderValue {
    let mut text = format!("{}={value}; Max-Age={max_age}; Path=/; HttpOnly; SameSite=Lax", cookie_name(base, secure));
    if secure {
        text.push_str("; Secure");
    }
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("invalid=; Max-Age=0; Path=/"))
}

/// The value of our cookie `base` if present and shaped like one of our random values.
pub fn read_cookie(headers: &HeaderMap, base: &str, secure: bool) -> Option<String> {
    let jar = CookieJar::from_headers(headers);
    let value = jar.get(&cookie_name(base, secure))?.value();
    let ok =
        value.len() == SESSION_VALUE_LEN && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    ok.then(|| value.to_owned())
}

/// Starts a new session for `user` and returns it with the `Set-Cookie` header that carries it.
pub async fn sign_in(state: &IdentityContext, user: User) -> StoreResult<(BrowserSession, HeaderValue)> {
    let value = random_token(32);
    let id_hash = sha256_hex(&value);
    let csrf_token = random_token(32);
    let now = state.now();
    state.store.browser_sessions().create(&id_hash, &user.id, &csrf_token, now, now + SESSION_TTL_SECONDS).await?;
    let cookie = set_cookie(SESSION_COOKIE, &value, SESSION_TTL_SECONDS, state.config.secure_cookies());
    Ok((BrowserSession { user, id_hash, csrf_token }, cookie))
}

/// Ends a session server-side; returns the `Set-Cookie` header that clears the cookie.
pub async fn sign_out(state: &IdentityContext, id_hash: &str) -> StoreResult<HeaderValue> {
    state.store.browser_sessions().delete(id_hash).await?;
    Ok(clear_cookie(state))
}

/// A `Set-Cookie` header deleting the session cookie.
pub fn clear_cookie(state: &IdentityContext) -> HeaderValue {
    set_cookie(SESSION_COOKIE, "", 0, state.config.secure_cookies())
}

/// `sha256_hex` of the session cookie in `headers`, if any (whether or not it is still live).
pub fn presented_session_hash(state: &IdentityContext, headers: &HeaderMap) -> Option<String> {
    read_cookie(headers, SESSION_COOKIE, state.config.secure_cookies()).map(|v| sha256_hex(&v))
}

/// The live session named by the cookie in `headers`, with its user.
pub async fn current(state: &IdentityContext, headers: &HeaderMap) -> StoreResult<Option<BrowserSession>> {
    let Some(id_hash) = presented_session_hash(state, headers) else { return Ok(None) };
    let Some(row) = state.store.browser_sessions().live(&id_hash, state.now()).await? else { return Ok(None) };
    let Some(user) = state.store.users().by_id(&row.user_id).await? else { return Ok(None) };
    // A disabled user's sessions are also deleted when disabled; this covers any that race it.
    if user.is_disabled() {
        return Ok(None);
    }
    Ok(Some(BrowserSession { user, id_hash: row.id_hash, csrf_token: row.csrf_token }))
}

/// The signed-in browser, if any.
#[derive(Debug, Clone)]
pub struct OptionalBrowserSession(pub Option<BrowserSession>);

impl<S: AsRef<IdentityContext> + Send + Sync> FromRequestParts<S> for OptionalBrowserSession {
    type Rejection = BrowserSessionError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(current(state.as_ref(), &parts.headers).await?))
    }
}

/// A signed-in browser; otherwise a 303 to `/login?next=<this path>` (the path only for GET, as
/// a form POST cannot be replayed after signing in).
impl<S: AsRef<IdentityContext> + Send + Sync> FromRequestParts<S> for BrowserSession {
    type Rejection = BrowserSessionError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match current(state.as_ref(), &parts.headers).await? {
            Some(session) => Ok(session),
            None => {
                let next = if parts.method == Method::GET {
                    parts.uri.path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "/".into())
                } else {
                    parts.uri.path().to_owned()
                };
                Err(BrowserSessionError::SignInRequired { next })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header::COOKIE;

    #[test]
    fn session_cookie_over_https_is_host_prefixed_secure_httponly_and_lax() {
        let cookie = set_cookie(SESSION_COOKIE, "v", SESSION_TTL_SECONDS, true);
        assert_eq!(
            cookie.to_str().unwrap(),
            "__Host-oauth_broker_session=v; Max-Age=43200; Path=/; HttpOnly; SameSite=Lax; Secure"
        );
    }

    #[test]
    fn session_cookie_over_http_has_no_prefix_and_no_secure_flag() {
        let cookie = set_cookie(SESSION_COOKIE, "v", 0, false);
        assert_eq!(cookie.to_str().unwrap(), "oauth_broker_session=v; Max-Age=0; Path=/; HttpOnly; SameSite=Lax");
    }

    #[test]
    fn only_well_formed_values_under_the_right_name_are_read() {
        let good = random_token(32);
        let mut headers = HeaderMap::new();
        headers.insert(COOKIE, HeaderValue::from_str(&format!("oauth_broker_session={good}")).unwrap());
        assert_eq!(read_cookie(&headers, SESSION_COOKIE, false).as_deref(), Some(good.as_str()));
        // Over https only the __Host- cookie counts: a plain one could have been planted.
        assert_eq!(read_cookie(&headers, SESSION_COOKIE, true), None);
        headers.insert(COOKIE, HeaderValue::from_static("oauth_broker_session=short"));
        assert_eq!(read_cookie(&headers, SESSION_COOKIE, false), None);
    }
}
