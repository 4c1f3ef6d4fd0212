//! Who signs in: users, local accounts and those an OpenID Connect issuer vouches for, and
//! their browser sessions.
//!
//! - [`accounts`]: the `users` rows (the identity is (issuer, subject); local accounts also
//!   have a username and a password hash), admins and the admin list;
//! - [`external`]: users an external issuer vouches for, created on first sight;
//! - [`sessions`]: browser sessions, stored as the hash of the cookie's value.

pub(in crate::store) mod accounts;
pub(in crate::store) mod external;
pub(in crate::store) mod sessions;

pub use accounts::{AdminChange, AdminGuard, Guarded, User};
pub use sessions::BrowserSession;
