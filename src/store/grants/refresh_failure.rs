//! Why a grant's last refresh failed (migration 0026, `grants.refresh_error`), parsed once at
//! the store boundary like the grant's status. The broker's connection status
//! (`broker::connection_status`) reads it to say "refresh failing (rate_limited)" or "revoked at
//! the provider" instead of a bare "connected" or "needs consent".

/// Why a grant's last refresh failed (migration 0026), as stored in `refresh_error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshFailure {
    /// The token endpoint answered 429 (or OAuth `slow_down`).
    RateLimited,
    /// The token endpoint answered 5xx (or OAuth `server_error`, `temporarily_unavailable`).
    ServerError,
    /// The token endpoint did not answer in time.
    Timeout,
    /// The token endpoint could not be reached.
    Unreachable,
    /// The provider refused the refresh for a reason connecting again does not obviously fix
    /// (another OAuth error, an answer that is not OAuth).
    Refused,
    /// The provider answered `invalid_grant`: the grant was revoked or expired there.
    InvalidGrant,
    /// The access token expired and there is no refresh token to renew it.
    NoRefreshToken,
    /// A stored token no longer opens (see `broker::sealed_grant::broken`).
    Unreadable,
    /// The provider refused an API key (401): it has no refresh, the user must enter a new one.
    KeyRefused,
}

impl RefreshFailure {
    pub const ALL: [RefreshFailure; 9] = [
        RefreshFailure::RateLimited,
        RefreshFailure::ServerError,
        RefreshFailure::Timeout,
        RefreshFailure::Unreachable,
        RefreshFailure::Refused,
        RefreshFailure::InvalidGrant,
        RefreshFailure::NoRefreshToken,
        RefreshFailure::Unreadable,
        RefreshFailure::KeyRefused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RefreshFailure::RateLimited => "rate_limited",
            RefreshFailure::ServerError => "server_error",
            RefreshFailure::Timeout => "timeout",
            RefreshFailure::Unreachable => "unreachable",
            RefreshFailure::Refused => "refused",
            RefreshFailure::InvalidGrant => "invalid_grant",
            RefreshFailure::NoRefreshToken => "no_refresh_token",
            RefreshFailure::Unreadable => "unreadable",
            RefreshFailure::KeyRefused => "key_refused",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_what_it_writes_and_nothing_else_parses() {
        for kind in RefreshFailure::ALL {
            assert_eq!(RefreshFailure::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(RefreshFailure::parse("Timeout"), None);
        assert_eq!(RefreshFailure::parse(""), None);
    }
}
