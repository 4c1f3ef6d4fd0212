//! The database: one [`Store`] over SQLite (embedded default) or PostgreSQL, chosen by the URL.
//!
//! sqlx's `Any` driver lets one set of runtime queries serve both: every query is a single SQL
//! string with `$1` placeholders (SQLite reads `$N` as positional too), timestamps are integer
//! Unix seconds bound from Rust, and blobs are `BLOB`/`BYTEA`. Where SQL must differ the
//! migrations differ, never the queries. One-time values (state, codes, refresh leases) are
//! consumed with compare-and-swap updates that check rows affected, which is correct on one
//! instance or many.

pub mod audit;
pub mod authorizations;
pub mod consents;
pub mod demo;
pub mod external_users;
pub mod grants;
pub mod keys;
pub mod oauth_clients;
pub mod oauth_codes;
pub mod services;
pub mod sessions;
pub mod timed;
pub mod users;

use std::str::FromStr;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, Connection, Executor};

pub use timed::{DatabaseTimeouts, Db};

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/postgres");

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database did not answer in time, or could not be reached, or gave up on a lock:
    /// nothing was decided, and the same call may succeed if retried shortly. Faces answer
    /// "temporarily unavailable, retry".
    #[error("the database is unavailable: {0}")]
    Unavailable(sqlx::Error),
    #[error("database error: {0}")]
    Database(sqlx::Error),
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
        if is_transient(&error) { StoreError::Unavailable(error) } else { StoreError::Database(error) }
    }
}

/// Errors that say "not now" rather than "never": the connection, the pool or a timer gave up.
fn is_transient(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| is_transient_code(&code)),
        _ => false,
    }
}

/// PostgreSQL SQLSTATEs (Appendix A of its manual) and SQLite result codes that mean "retry".
fn is_transient_code(code: &str) -> bool {
    // PostgreSQL: connection exceptions (08…), the server going away (57P01–57P03), too many
    // connections (53300), statement_timeout (57014), lock_timeout (55P03), and the two a retry
    // resolves by definition (40001 serialization failure, 40P01 deadlock).
    if code.starts_with("08")
        || matches!(code, "57P01" | "57P02" | "57P03" | "53300" | "57014" | "55P03" | "40001" | "40P01")
    {
        return true;
    }
    // SQLite: SQLITE_BUSY (5) and SQLITE_LOCKED (6), in any of their extended forms.
    code.parse::<i32>().is_ok_and(|n| matches!(n & 0xff, 5 | 6))
}

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Cheap to clone: a handle on the pool.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    timeouts: DatabaseTimeouts,
}

impl Store {
    /// Connects (creating the SQLite file and its directory if needed); does not migrate.
    pub async fn connect(database_url: &str) -> StoreResult<Self> {
        Self::connect_with(database_url, DatabaseTimeouts::default()).await
    }

    /// [`Store::connect`] with the bound on each database call ([`timed`] explains the layers).
    pub async fn connect_with(database_url: &str, timeouts: DatabaseTimeouts) -> StoreResult<Self> {
        sqlx::any::install_default_drivers();
        let backend = if database_url.starts_with("sqlite:") { Backend::Sqlite } else { Backend::Postgres };
        if backend == Backend::Sqlite {
            create_sqlite_parent_dir(database_url);
        }
        let options = AnyConnectOptions::from_str(database_url)?;
        let server_side_ms = timeouts.server_side().as_millis();
        let release_limit = timeouts.query;
        let pool = AnyPoolOptions::new()
            .max_connections(if backend == Backend::Sqlite { 8 } else { 16 })
            .acquire_timeout(timeouts.query)
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    match backend {
                        Backend::Sqlite => {
                            // SQLite has one writer: WAL lets readers proceed during a write and
                            // busy_timeout makes a second writer wait (boundedly) instead of
                            // failing at once.
                            conn.execute("PRAGMA journal_mode = WAL").await?;
                            conn.execute(format!("PRAGMA busy_timeout = {server_side_ms}").as_str()).await?;
                            conn.execute("PRAGMA foreign_keys = ON").await?;
                            conn.execute("PRAGMA synchronous = NORMAL").await?;
                        }
                        Backend::Postgres => {
                            // The server ends a slow statement or a long wait on a row lock
                            // itself, which keeps the connection usable (see `timed`).
                            conn.execute(format!("SET statement_timeout = {server_side_ms}").as_str()).await?;
                            conn.execute(format!("SET lock_timeout = {server_side_ms}").as_str()).await?;
                        }
                    }
                    Ok(())
                })
            })
            .after_release(move |conn, _meta| {
                // A call given up on (its future dropped) returns its connection mid-query;
                // sqlx then pings it, unbounded. A silent socket would hold that pool slot until
                // the kernel gives up on it (minutes), so the ping gets the same deadline and a
                // connection that fails it is closed rather than reused.
                Box::pin(async move {
                    match tokio::time::timeout(release_limit, conn.ping()).await {
                        Ok(Ok(())) => Ok(true),
                        Ok(Err(error)) => Err(error),
                        Err(_) => Err(timed::timed_out(release_limit)),
                    }
                })
            })
            .connect_with(options)
            .await?;
        Ok(Self { pool, backend, timeouts })
    }

    /// The executor every query runs on: the pool, with the deadline of [`timed`].
    pub fn db(&self) -> Db<'_> {
        Db { pool: &self.pool, limit: self.timeouts.query }
    }

    /// Runs a multi-statement unit (a transaction) within the same bound as one call; a
    /// transaction dropped on timeout is rolled back by sqlx when its connection is returned.
    pub(crate) async fn bounded<T>(&self, work: impl std::future::Future<Output = StoreResult<T>>) -> StoreResult<T> {
        let limit = self.timeouts.query;
        tokio::time::timeout(limit, work).await.unwrap_or_else(|_| Err(StoreError::from(timed::timed_out(limit))))
    }

    pub async fn migrate(&self) -> StoreResult<()> {
        match self.backend {
            Backend::Sqlite => SQLITE_MIGRATIONS.run(&self.pool).await?,
            Backend::Postgres => POSTGRES_MIGRATIONS.run(&self.pool).await?,
        }
        Ok(())
    }

    /// Versions applied to this database and versions this binary knows, for `migrate --status`.
    pub fn known_migrations(&self) -> Vec<(i64, String)> {
        let migrator = match self.backend {
            Backend::Sqlite => &SQLITE_MIGRATIONS,
            Backend::Postgres => &POSTGRES_MIGRATIONS,
        };
        migrator.iter().map(|m| (m.version, m.description.to_string())).collect()
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The pool without the per-call deadline: migrations, backups, and tests that poke rows.
    /// Queries of the store itself run on [`Store::db`].
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// SQLite: moves everything in the write-ahead log into the database file and truncates the
    /// log. Nothing to do on PostgreSQL.
    pub async fn checkpoint(&self) -> StoreResult<()> {
        if self.backend == Backend::Sqlite {
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(self.db()).await?;
        }
        Ok(())
    }

    /// SQLite: a consistent copy of the whole database at `path` while others keep using it
    /// (`VACUUM INTO`, which reads one snapshot). The file must not exist.
    pub async fn backup_to(&self, path: &std::path::Path) -> StoreResult<()> {
        let target = path.to_str().ok_or_else(|| StoreError::Corrupt("the backup path is not UTF-8".into()))?;
        sqlx::query("VACUUM INTO $1").bind(target).execute(self.pool()).await?;
        Ok(())
    }
}

/// The file a `sqlite:` URL names (`None` for other URLs and in-memory databases).
pub fn sqlite_path(url: &str) -> Option<std::path::PathBuf> {
    if !url.starts_with("sqlite:") {
        return None;
    }
    let path = url.trim_start_matches("sqlite://").trim_start_matches("sqlite:");
    let path = path.split('?').next().unwrap_or_default();
    if path.is_empty() || path == ":memory:" {
        return None;
    }
    Some(std::path::PathBuf::from(path))
}

fn create_sqlite_parent_dir(url: &str) {
    let Some(path) = sqlite_path(url) else { return };
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        let _ = std::fs::create_dir_all(parent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migration_folders_have_the_same_versions() {
        let sqlite: Vec<_> = SQLITE_MIGRATIONS.iter().map(|m| (m.version, m.description.clone())).collect();
        let postgres: Vec<_> = POSTGRES_MIGRATIONS.iter().map(|m| (m.version, m.description.clone())).collect();
        assert_eq!(sqlite, postgres);
        assert!(!sqlite.is_empty());
    }

    #[test]
    fn a_database_that_did_not_answer_is_unavailable_and_a_bad_query_is_not() {
        assert!(StoreError::from(timed::timed_out(std::time::Duration::from_secs(1))).is_unavailable());
        assert!(StoreError::from(sqlx::Error::PoolTimedOut).is_unavailable());
        assert!(!StoreError::from(sqlx::Error::RowNotFound).is_unavailable());
        for code in ["57014", "55P03", "08006", "40P01", "5", "517", "6"] {
            assert!(is_transient_code(code), "{code} means retry");
        }
        for code in ["23505", "42P01", "1", "19"] {
            assert!(!is_transient_code(code), "{code} does not");
        }
    }
}
