//! An external OpenID Connect issuer vouches for users (`[identity] mode = "oidc"`; DESIGN.md
//! "Identity"; MCP 2025-11-25 basic/authorization).
//!
//! | file                | what                                                              |
//! |---------------------|-------------------------------------------------------------------|
//! | [`discovery`]       | `/.well-known/openid-configuration`, `issuer` checked exactly      |
//! | [`jwks`]            | the issuer's signing keys, parsed and filtered                     |
//! | [`verify`]          | bearer JWTs on /mcp and ID tokens: signature, alg, iss, aud, time  |
//! | [`browser_login`]   | sign-in: code + PKCE + nonce; routes in `src/web/oidc_login.rs`    |
//! | [`fetch`]           | outbound HTTP to the issuer: no redirects, timeouts, size caps     |
//! | [`oidc_context`]    | [`OidcContext`]: the issuer's settings and its cached snapshot     |
//! | [`oidc_error`]      | [`OidcError`]: why a token or a sign-in was refused                |
//!
//! [`OidcContext`] is built at start-up when the mode is `oidc` and lives in `AppState`. It
//! caches the discovery document and key set together in one snapshot. They are fetched at
//! start-up (a failure there is logged, not fatal: the issuer may come up after us), again
//! every 10 minutes in the background, and on demand when a token names a `kid` we do not know,
//! a key rotation. Every fetch, whatever its reason, waits at least [`MIN_REFRESH_SECONDS`]
//! after the previous one, measured on the injected clock, so tokens with made-up `kid`s cannot
//! make us hammer the issuer. A failed refresh keeps the previous snapshot.
//!
//! **Unreachable issuer → 503.** When we cannot get keys at all (or the key set cannot be
//! refreshed for an unknown `kid`), a bearer request gets 503 `temporarily_unavailable` and an
//! `error` log line naming the issuer, not 401: the token may well be valid, and a 401 would
//! send clients into a re-authorization that fails the same way. Tokens whose key is cached keep
//! working while the issuer is down.

pub mod browser_login;
pub mod discovery;
pub mod fetch;
pub mod jwks;
pub mod oidc_context;
pub mod oidc_error;
pub mod verify;

pub use browser_login::login_path;
pub use oidc_context::{BACKGROUND_REFRESH, CALLBACK_PATH, MIN_REFRESH_SECONDS, OidcContext};
pub use oidc_error::OidcError;
pub use verify::{VerifiedClaims, authenticate_bearer, authenticate_bearer_for, verify_bearer, verify_id_token};
