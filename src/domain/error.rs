//! What is wrong with a value given at the edge, worded for the person who gave it.

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DomainError {
    #[error("provider id must be 1-64 characters of a-z, 0-9, '-' or '_', got {0:?}")]
    BadProviderId(String),
    #[error("scope {0:?} is not a valid OAuth scope token (RFC 6749 §3.3)")]
    BadScope(String),
    #[error("elicitation id is malformed")]
    BadElicitationId,
    #[error("an organization's slug is 1-64 characters of a-z, 0-9 or '-', not starting with '-', got {0:?}")]
    BadOrgSlug(String),
    #[error("role must be \"member\" or \"admin\", got {0:?}")]
    BadOrgRole(String),
}
