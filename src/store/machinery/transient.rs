//! Which sqlx errors are the database being away for now (unreachable, overloaded, locked or
//! restarting), read from the backend's own codes: conditions that pass without anyone acting.

/// The one classification of sqlx errors: the store uses it to make
/// [`StoreError::Unavailable`](super::error::StoreError::Unavailable), and
/// [`super::unavailable::is_unavailable`] for errors from elsewhere.
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
