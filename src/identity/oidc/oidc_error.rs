//! [`OidcError`]: why a bearer token or a browser sign-in was refused by the OIDC checks, and
//! how a bearer request answers it.

use crate::store::StoreError;

/// Why a token or a sign-in was refused. Bearer requests map these to 401 `invalid_token`
/// ([`OidcError::description`]), 403 `insufficient_scope`, or 503 ([`OidcError::is_unavailable`]).
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    #[error("the token is not a well-formed JWS")]
    Malformed,
    #[error("the token's algorithm is not accepted")]
    AlgorithmNotAllowed,
    #[error("the token names a key the issuer does not publish")]
    UnknownKey,
    #[error("the key named by the token does not fit its algorithm")]
    KeyMismatch,
    #[error("the token's signature does not verify")]
    BadSignature,
    #[error("the token comes from another issuer")]
    WrongIssuer,
    #[error("the token is meant for another audience")]
    WrongAudience,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token was issued in the future")]
    IssuedInFuture,
    #[error("the token lacks the {0} claim")]
    MissingClaim(&'static str),
    #[error("the token's subject is empty or too long")]
    BadSubject,
    #[error("the ID token's nonce does not match this sign-in")]
    NonceMismatch,
    #[error("the ID token was issued to another client (azp)")]
    WrongAuthorizedParty,
    /// The token is valid but lacks required scopes; `scope` is what to ask for (RFC 6750 §3.1).
    #[error("the token lacks required scopes")]
    InsufficientScope { scope: String },
    /// The issuer could not be reached (network, timeout, 5xx).
    #[error("the OIDC issuer is unavailable: {0}")]
    Unavailable(String),
    /// The issuer answered, but not something we can use (wrong `issuer`, no usable key, …).
    #[error("the OIDC issuer's answer is unusable: {0}")]
    BadIssuerResponse(String),
    #[error("user store: {0}")]
    Store(#[from] StoreError),
}

impl OidcError {
    /// Not the token's fault: answer 503, log at error level.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, OidcError::Unavailable(_) | OidcError::BadIssuerResponse(_) | OidcError::Store(_))
    }

    /// A short reason for `error_description` (RFC 6750 §3): says what failed, never echoes the
    /// token.
    pub fn description(&self) -> &'static str {
        match self {
            OidcError::Expired => "the token has expired",
            OidcError::NotYetValid | OidcError::IssuedInFuture => "the token is not valid yet",
            OidcError::WrongAudience => "the token is not meant for this resource",
            OidcError::WrongIssuer => "the token comes from another issuer",
            OidcError::InsufficientScope { .. } => "the token lacks required scopes",
            _ => "the token is not valid for this server",
        }
    }
}
