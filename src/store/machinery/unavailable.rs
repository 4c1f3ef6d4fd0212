//! Which database failures mean "the database is away for now" (try again shortly) rather
//! than a bug or bad data, so faces can answer with a retryable error instead of a bare
//! internal one (the way bearer authentication answers 503 `temporarily_unavailable`).
//!
//! Errors are recognised anywhere in a `source()` chain, so a core error that wraps a
//! [`super::error::StoreError`] is classified the same as the store error itself.

use std::error::Error;

use crate::store::machinery::error::StoreError;
use crate::store::machinery::transient::sqlx_unavailable;

/// How long to suggest waiting before trying again: a restart, failover or lock usually passes
/// within seconds, and asking again sooner only adds load.
pub const RETRY_AFTER_SECONDS: u64 = 5;

/// Whether `error` (or what caused it) is the database being unreachable, overloaded, locked
/// or restarting: conditions that pass without anyone acting.
pub fn is_unavailable(error: &(dyn Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(store) = error.downcast_ref::<StoreError>() {
            // The store classified its own errors when it made them ([`StoreError::Unavailable`]).
            return store.is_unavailable() || matches!(store, StoreError::Database(sqlx) if sqlx_unavailable(sqlx));
        }
        if let Some(sqlx) = error.downcast_ref::<sqlx::Error>() {
            return sqlx_unavailable(sqlx);
        }
        next = error.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("wrapped: {0}")]
    struct Wrapper(#[source] StoreError);

    #[test]
    fn pool_and_connection_failures_are_unavailable_through_wrappers() {
        assert!(is_unavailable(&StoreError::Database(sqlx::Error::PoolTimedOut)));
        assert!(is_unavailable(&Wrapper(StoreError::Database(sqlx::Error::PoolClosed))));
        let io = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(is_unavailable(&Wrapper(StoreError::Database(io))));
    }

    /// `#[error(transparent)]` hands over the inner error's source, not the inner error, so the
    /// store's own verdict must survive as the sqlx error underneath (a tool call during an
    /// outage once answered a bare -32603 through `AccessError`'s transparent wrapper).
    #[derive(Debug, thiserror::Error)]
    enum Transparent {
        #[error(transparent)]
        Store(#[from] StoreError),
    }

    #[test]
    fn unavailable_survives_a_transparent_wrapper() {
        assert!(is_unavailable(&Transparent::from(StoreError::from(sqlx::Error::PoolTimedOut))));
        let busy = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert!(is_unavailable(&Transparent::from(StoreError::from(busy))));
        assert!(!is_unavailable(&Transparent::from(StoreError::from(sqlx::Error::RowNotFound))));
    }

    #[test]
    fn bad_data_and_conflicts_are_not() {
        assert!(!is_unavailable(&StoreError::Conflict));
        assert!(!is_unavailable(&StoreError::Corrupt("x".into())));
        assert!(!is_unavailable(&StoreError::Database(sqlx::Error::RowNotFound)));
    }
}
