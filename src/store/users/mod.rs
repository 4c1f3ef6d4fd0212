//! Who signs in: users, local accounts and those an OpenID Connect issuer vouches for, and
//! their browser sessions.
//!
//! - [`accounts`]: the `users` rows (the identity is (issuer, subject); local accounts also
//!   have a username and a password hash), read and changed through [`Users`];
//! - [`external`]: users an external issuer vouches for, created on first sight;
//! - [`admins`]: who may open `/admin`, and the changes that must leave an enabled admin;
//! - [`list`]: the admin users list, and the users' names other lists search by;
//! - [`sessions`]: browser sessions, stored as the hash of the cookie's value
//!   ([`BrowserSessions`]).

pub(in crate::store) mod accounts;
pub(in crate::store) mod admins;
pub(in crate::store) mod external;
pub(in crate::store) mod list;
pub(in crate::store) mod sessions;

pub use accounts::{User, Users};
pub use admins::{AdminChange, AdminGuard, Guarded};
pub use sessions::{BrowserSession, BrowserSessions};
