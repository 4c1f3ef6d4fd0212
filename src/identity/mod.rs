//! Who is asking. On /mcp, only a verified bearer JWT says who the user is ([`bearer`]); in the
//! browser, a sign-in session cookie does ([`browser`]). The consent pages act only when both
//! name the same user. Where a browser goes after signing in is checked by [`next`]. A
//! registered service proves itself with HTTP Basic ([`service_auth`]), within the limits of
//! [`service_limits`].
//!
//! Also: [`AuthenticatedUser`] (who a verified credential says is asking), [`IdentityContext`]
//! (what the checks read), [`jwt`] (the broker's own signing keys and tokens), [`bearer_cache`]
//! (verified tokens until something they rest on changes), [`oidc`] (an external issuer),
//! [`accounts`] and [`password`] (local accounts).
//!
//! Identity decides and imports no face: refusals are its own error enums
//! ([`browser::BrowserSessionError`], [`oidc::browser_login::SignInError`],
//! [`service_auth_refusal::ServiceAuthRefusal`]), which the faces turn into pages or problems.

pub mod accounts;
mod authenticated_user;
pub mod bearer;
pub mod bearer_cache;
pub mod browser;
mod context;
pub mod jwt;
pub mod next;
pub mod oidc;
pub mod password;
pub mod service_auth;
pub mod service_auth_refusal;
pub mod service_limits;

/// The client a token was issued to, and the prefix of a service's client id, are plain values
/// of [`crate::domain`], re-exported where identity establishes them.
pub use crate::domain::{ClientIdentity, SERVICE_CLIENT_ID_PREFIX};
pub use authenticated_user::AuthenticatedUser;
pub use context::IdentityContext;
