//! What a store call can fail with, and the one place a database error becomes
//! [`StoreError::Unavailable`] ([`super::transient`] classifies it).

use crate::store::machinery::transient;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database did not answer in time, or could not be reached, or gave up on a lock:
    /// nothing was decided, and the same call may succeed if retried shortly. Faces answer
    /// "temporarily unavailable, retry".
    #[error("the database is unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    #[error("migration failed: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
    #[error("a row with the same key already exists")]
    Conflict,
    #[error("stored value is invalid: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// Unique-constraint violations become `Conflict` so callers can branch on them.
    pub(crate) fn from_write(error: sqlx::Error) -> Self {
        match &error {
            sqlx::Error::Database(db) if db.is_unique_violation() => StoreError::Conflict,
            _ => StoreError::from(error),
        }
    }

    /// True when retrying later may succeed (see [`StoreError::Unavailable`]).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        if transient::sqlx_unavailable(&error) { StoreError::Unavailable(error) } else { StoreError::Database(error) }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::machinery::deadlines;

    #[test]
    fn a_database_that_did_not_answer_is_unavailable_and_a_bad_query_is_not() {
        assert!(StoreError::from(deadlines::timed_out(std::time::Duration::from_secs(1))).is_unavailable());
        assert!(StoreError::from(sqlx::Error::PoolTimedOut).is_unavailable());
        assert!(!StoreError::from(sqlx::Error::RowNotFound).is_unavailable());
        // Backend codes are classified in `unavailable` (its tests list them).
    }
}
