//! Which database failures mean "the database is away for now" (try again shortly) rather
//! than a bug or bad data, so faces can answer with a retryable error instead of a bare
//! internal one (the way bearer authentication answers 503 `temporarily_unavailable`).
//!
//! Errors are recognised anywhere in a `source()` chain, so a core error that wraps a
//! [`super::error::StoreError`] is classified the same as the store error itself.

use std::error::Error;

use crate::store::machinery::error::StoreError;

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

/// The one classification of sqlx errors: the store uses it to make
/// [`StoreError::Unavailable`], and [`is_unavailable`] for errors from elsewhere.
pub fn sqlx_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        // A connection cut mid-message (the database restarting, a proxy dropping it).
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            let Some(code) = db.code() else { return false };
            // The `Any` driver hands over the backend's own error; SQLite codes are numbers, and
            // so are many SQLSTATEs, so the backend decides how to read the code.
            if db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>().is_some() {
                postgres_transient(&code)
            } else {
                db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() && sqlite_transient(&code)
            }
        }
        _ => false,
    }
}

/// SQLite reports its extended result code; the primary code is the low byte: 5 SQLITE_BUSY,
/// 6 SQLITE_LOCKED (another writer held the database past busy_timeout).
fn sqlite_transient(code: &str) -> bool {
    code.parse::<u32>().is_ok_and(|number| matches!(number & 0xff, 5 | 6))
}

/// PostgreSQL SQLSTATEs (Appendix A of its manual). Class 08: connection exception; 53:
/// insufficient resources (too many connections); 57P01–57P05: administrator or crash
/// shutdown, cannot connect now, idle session timeout; 57014: statement timeout or
/// cancellation; 40001/40P01: serialization failure, deadlock; 55P03: lock not available.
fn postgres_transient(code: &str) -> bool {
    code.starts_with("08")
        || code.starts_with("53")
        || code.starts_with("57P")
        || matches!(code, "57014" | "40001" | "40P01" | "55P03")
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

    #[test]
    fn busy_locked_and_connection_codes_are_transient_others_not() {
        for code in ["5", "6", "517", "262"] {
            assert!(sqlite_transient(code), "{code}");
        }
        for code in ["1", "19", "2067", "08006"] {
            assert!(!sqlite_transient(code), "{code}");
        }
        for code in ["08006", "57P01", "53300", "57014", "40001", "40P01", "55P03"] {
            assert!(postgres_transient(code), "{code}");
        }
        for code in ["23505", "42P01", "22001", "5"] {
            assert!(!postgres_transient(code), "{code}");
        }
    }
}
