//! [`ServiceAuthRefusal`]: why a registered service's request was not let through (its
//! credentials, or a limit: [`Limit`]); each face words it.

use crate::store::StoreError;

/// Why a service's request was not let through; each face words it (problem JSON at the token
/// API, an RFC 6749 error at the token exchange).
#[derive(Debug)]
pub enum ServiceAuthRefusal {
    /// The credentials are missing, malformed or wrong: one answer for every cause, so it
    /// reveals nothing about which services exist.
    InvalidClient,
    /// A limit is reached: try again in `retry_after` seconds.
    Limited { retry_after: u64, limit: Limit },
    /// The database failed.
    Store(StoreError),
}

impl From<StoreError> for ServiceAuthRefusal {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

/// Which limit refused a service (the `limit` of the answer and of its audit entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The service's request budget is used up.
    Requests,
    /// Too many of the service's waits are open (the token API's long polls and streams).
    OpenWaits,
    /// The address is locked after too many failed authentications.
    FailedAuthentication,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Requests => "requests",
            Limit::OpenWaits => "open_waits",
            Limit::FailedAuthentication => "failed_authentication",
        }
    }
}
