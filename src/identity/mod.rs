//! Who is asking. On /mcp, only a verified bearer JWT says who the user is ([`bearer`]); in the
//! browser, a sign-in session cookie does ([`browser`]). The consent pages act only when both
//! name the same user.

pub mod bearer;
pub mod browser;
pub mod jwt;
pub mod oidc;
pub mod password;

/// The user behind a request, as established by a verified credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticatedUser {
    /// `users.id`.
    pub user_id: String,
    pub issuer: String,
    pub subject: String,
    /// For display only (consent page, logs never).
    pub display_name: Option<String>,
}
