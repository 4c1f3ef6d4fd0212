//! [`AuthenticatedUser`]: who a verified credential says is asking, and through which client.

use crate::domain::ClientIdentity;

/// The user behind a request, as established by a verified credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticatedUser {
    /// `users.id`.
    pub user_id: String,
    pub issuer: String,
    pub subject: String,
    /// For display only (consent page, logs never).
    pub display_name: Option<String>,
    /// The client holding the token: a user's consent to use a connection is per client.
    pub client: ClientIdentity,
}
