//! The sign-in device cookie: proof that this browser once signed in to an account, so the
//! account-wide sign-in budget ([`super::throttle`]) does not lock the owner out.
//!
//! The value is `ID.MAC`: a random id and an HMAC-SHA256 (RFC 2104) over the account name and
//! the id, keyed by a secret derived from the sealing key (so every instance sharing the key
//! agrees, and rotating the key forgets all devices). It grants nothing by itself: it only
//! spares its browser the account lock, and carries its own small failure budget.

use axum::http::{HeaderMap, HeaderValue};
use axum_extra::extract::cookie::CookieJar;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use secrecy::ExposeSecret;
use sha2::Sha256;

use crate::crypto::random_token;
use crate::identity::browser::{cookie_name, set_cookie};
use crate::state::AppState;

const DEVICE_COOKIE: &str = "oauth_broker_device";
/// How long a browser stays recognised without signing in again.
const DEVICE_COOKIE_TTL_SECONDS: i64 = 180 * 24 * 60 * 60;
const ID_LEN: usize = 43;
const HKDF_LABEL: &str = "sign-in device cookie";

fn mac(key: &[u8], username: &str, id: &str) -> Hmac<Sha256> {
    // HMAC takes keys of any length, so this cannot fail.
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    // The same case-folding as the throttle, so "Alice" and "alice" share a device.
    mac.update(username.trim().to_lowercase().as_bytes());
    mac.update(b"\0");
    mac.update(id.as_bytes());
    mac
}

/// A new cookie value for `username`: `ID.MAC`.
fn sign(key: &[u8], username: &str) -> String {
    let id = random_token(32);
    let tag = mac(key, username, &id).finalize().into_bytes();
    format!("{id}.{}", URL_SAFE_NO_PAD.encode(tag))
}

/// The id in `value` if its MAC is right for `username`.
fn verify(key: &[u8], username: &str, value: &str) -> Option<String> {
    let (id, tag) = value.split_once('.')?;
    if id.len() != ID_LEN {
        return None;
    }
    let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
    // `verify_slice` compares in constant time.
    mac(key, username, id).verify_slice(&tag).ok().map(|()| id.to_owned())
}

/// The `Set-Cookie` header recognising this browser for `username` from now on.
pub fn remember(state: &AppState, username: &str) -> HeaderValue {
    let key = state.core.sealer.derive_secret(HKDF_LABEL);
    let value = sign(key.expose_secret().as_bytes(), username);
    set_cookie(DEVICE_COOKIE, &value, DEVICE_COOKIE_TTL_SECONDS, state.core.config.secure_cookies())
}

/// The device id, if the browser's device cookie was issued for `username` by this broker.
pub fn recognised(state: &AppState, headers: &HeaderMap, username: &str) -> Option<String> {
    let jar = CookieJar::from_headers(headers);
    let cookie = jar.get(&cookie_name(DEVICE_COOKIE, state.core.config.secure_cookies()))?;
    let key = state.core.sealer.derive_secret(HKDF_LABEL);
    verify(key.expose_secret().as_bytes(), username, cookie.value())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_cookie_is_recognised_for_its_own_account_only() {
        let key = b"k".repeat(32);
        let value = sign(&key, "Alice");
        let id = verify(&key, "alice ", &value).expect("same account, case-folded");
        assert_eq!(id.len(), ID_LEN);
        assert_eq!(verify(&key, "bob", &value), None, "another account");
        assert_eq!(verify(&b"x".repeat(32), "alice", &value), None, "another broker's key");
    }

    #[test]
    fn a_forged_or_mangled_device_cookie_is_not_recognised() {
        let key = b"k".repeat(32);
        let value = sign(&key, "alice");
        let (id, tag) = value.split_once('.').unwrap();
        let other_id = random_token(32);
        assert_eq!(verify(&key, "alice", &format!("{other_id}.{tag}")), None, "the MAC binds the id");
        for mangled in [id.to_owned(), format!("{id}."), format!("{id}.!!"), String::new(), format!("x.{tag}")] {
            assert_eq!(verify(&key, "alice", &mangled), None, "{mangled}");
        }
    }
}
