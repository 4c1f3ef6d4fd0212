//! [`ServiceRefusal`]: why a registered service does not get the token it asked for, and what
//! the user must do first when that is the reason: the core's answer, which the token API words
//! as problem JSON and the token exchange as an RFC 6749 §5.2 error, with the same codes and
//! texts (`crate::problem`).

use std::time::Duration;

use url::Url;

use crate::clock::Timestamp;
use crate::domain::{ProviderId, Scopes};
use crate::store::StoreError;

#[derive(Debug)]
pub enum ServiceRefusal {
    /// No provider by that id is configured.
    UnknownProvider,
    /// The provider is configured, but the operator did not give it to this service.
    ProviderNotGiven(ProviderId),
    /// A proxy-only service asked for a token to hold.
    ProxyOnly,
    /// Scopes that are malformed or not the provider's (the domain's words for what is wrong).
    InvalidScope(String),
    /// Neither the user's access token nor a user id.
    NoSubject,
    /// Both the user's access token and a user id.
    SubjectTwice,
    /// A user's token was sent, but the service has no registered resource it could be for.
    NoResource,
    /// The service's registered resource is the broker's own audience (a misregistration).
    OwnAudience,
    /// The user's access token is invalid, expired or not for this service.
    InvalidSubjectToken,
    /// A service the operator did not mark trusted named a user id.
    NotTrusted,
    /// The user id names no user.
    UnknownUser,
    /// The user id names a disabled user.
    DisabledUser,
    /// The user must connect, reconnect or consent first, at the authorization's link.
    AuthorizationRequired(Box<AuthorizationRequired>),
    /// The provider did not answer usably (or its refresh is held back): try again later.
    ProviderUnavailable { retry_after: Duration },
    /// The provider refused to refresh the connection, saying `why`.
    ProviderRefused { provider_name: String, why: String, retry_after: Duration },
    /// Something failed inside the broker (its cause is logged where it happened).
    Failed,
    /// The database failed.
    Store(StoreError),
}

impl From<StoreError> for ServiceRefusal {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

/// What the user must do before the service may have a token, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationRequired {
    pub reason: RequiredReason,
    /// For [`RequiredReason::MissingScopes`]: the scopes the connection lacks.
    pub missing: Option<Scopes>,
    pub provider: ProviderId,
    /// The authorization's id (the service reads it at `GET /v1/authorizations/{id}`).
    pub authorization_id: String,
    /// Where to send the user.
    pub url: Url,
    pub expires_at: Timestamp,
}

/// Why the user must act before a service may have a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequiredReason {
    /// The user has no connection at the provider.
    NotConnected,
    /// The connection needs the user to sign in at the provider again (revoked or expired).
    NeedsReconsent,
    /// The connection lacks scopes the service asked for (`missing_scopes`).
    MissingScopes,
    /// The user has not allowed this service to use the connection.
    ConsentRequired,
}

impl RequiredReason {
    /// The reason's code, as the answer and its audit entry name it.
    pub fn as_str(self) -> &'static str {
        match self {
            RequiredReason::NotConnected => "not_connected",
            RequiredReason::NeedsReconsent => "needs_reconsent",
            RequiredReason::MissingScopes => "missing_scopes",
            RequiredReason::ConsentRequired => "consent_required",
        }
    }
}
