//! The database: one [`Store`] over SQLite (embedded default) or PostgreSQL, chosen by the URL.
//!
//! sqlx's `Any` driver lets one set of runtime queries serve both: every query is a single SQL
//! string with `$1` placeholders (SQLite reads `$N` as positional too), timestamps are integer
//! Unix seconds bound from Rust, and blobs are `BLOB`/`BYTEA`. Where SQL must differ the
//! migrations differ, never the queries. One-time values (state, codes, refresh leases) are
//! consumed with compare-and-swap updates that check rows affected, which is correct on one
//! instance or many.
//!
//! Every statement runs on a handle that says what it does to the caches of reads
//! ([`cache_effect`]: read, or write for one user, everyone or nothing), within a deadline
//! ([`deadlines`]); the caches follow [`generations`].

pub mod api_limits;
pub mod audit;
pub mod audit_queue;
pub mod authorizations;
pub mod cache_effect;
pub mod consents;
pub mod console;
pub mod console_lists;
pub mod deadlines;
mod declared;
pub mod demo;
pub mod demo_keys;
pub mod external_users;
pub mod gateway_consents;
pub mod gateway_lists;
pub mod gateway_servers;
pub mod generation_cache;
pub mod generations;
pub mod grant_accounts;
pub mod grant_cache;
pub mod grant_consents;
pub mod grant_events;
pub mod grants;
pub mod keys;
pub mod oauth_clients;
pub mod oauth_codes;
pub mod own_moves;
pub mod paging;
pub mod refresh_failure;
pub mod request_budget;
pub mod request_state_uses;
pub mod sealed;
pub mod search;
pub mod services;
pub mod sessions;
pub mod signals;
pub mod throttle;
pub mod unavailable;
pub mod users;
pub mod webhook_events;
pub mod webhooks;

use std::str::FromStr;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, Connection, Executor};

pub use cache_effect::{CacheEffect, FetchIn, Reads, Writes};
pub use deadlines::DatabaseTimeouts;

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/postgres");

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
        if unavailable::sqlx_unavailable(&error) { StoreError::Unavailable(error) } else { StoreError::Database(error) }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A row of sqlx's migration table, for `migrate --status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedMigration {
    pub version: i64,
    pub description: String,
    /// False when the migration started and failed (sqlx then refuses to go on).
    pub success: bool,
}

/// Cheap to clone: a handle on the pool.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    timeouts: DatabaseTimeouts,
    /// Statements run outside transactions since start (what a tool call costs).
    queries: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Whether what was read earlier may still be used ([`generations`]).
    generations: std::sync::Arc<generations::Generations>,
    /// A user's grants with a client's consents, as every tool call reads them ([`grant_cache`]).
    grant_cache: std::sync::Arc<grant_cache::GrantCache>,
    /// The (client, server) pairs each user approved, as every forwarded call reads them
    /// ([`gateway_consents`]).
    approval_cache: std::sync::Arc<gateway_consents::ApprovalCache>,
    /// This instance's leased shares of the services' request budgets ([`request_budget`]).
    budget_shares: std::sync::Arc<request_budget::BudgetShares>,
    /// The token API's audit events on their way to the database in batches ([`audit_queue`]).
    audit_queue: std::sync::Arc<audit_queue::AuditQueue>,
    /// Turns of the writes the token API makes at its own rate, on SQLite ([`Store::hot_write_turn`]).
    hot_writes: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// Services by client id, as every token-API request reads them ([`services`]).
    service_cache: std::sync::Arc<generation_cache::GenerationCache<String, services::ServiceRow>>,
    /// Addresses found not locked for failed service authentications, and when ([`api_limits`]).
    unlocked_addresses: std::sync::Arc<api_limits::UnlockedAddresses>,
    /// This store's id among the writers that move `auth_epoch` ([`own_moves`]).
    writer: std::sync::Arc<str>,
    /// Which providers and services have a webhook ([`webhooks`]).
    webhook_targets: std::sync::Arc<webhooks::TargetsCache>,
    /// Wakes this process's webhook delivery after an event was written ([`webhooks`]).
    webhook_wake: std::sync::Arc<tokio::sync::Notify>,
}

impl Store {
    /// Connects (creating the SQLite file and its directory if needed); does not migrate.
    pub async fn connect(database_url: &str) -> StoreResult<Self> {
        Self::connect_with(database_url, DatabaseTimeouts::default()).await
    }

    /// [`Store::connect`] with the bound on each database call ([`deadlines`] explains the
    /// layers).
    pub async fn connect_with(database_url: &str, timeouts: DatabaseTimeouts) -> StoreResult<Self> {
        sqlx::any::install_default_drivers();
        let backend = if database_url.starts_with("sqlite:") { Backend::Sqlite } else { Backend::Postgres };
        if backend == Backend::Sqlite {
            create_sqlite_parent_dir(database_url);
        }
        let options = AnyConnectOptions::from_str(database_url)?;
        let writer: std::sync::Arc<str> = uuid::Uuid::new_v4().to_string().into();
        let connect_writer = writer.clone();
        let server_side_ms = timeouts.server_side().as_millis();
        let release_limit = timeouts.query;
        let pool = AnyPoolOptions::new()
            .max_connections(if backend == Backend::Sqlite { 8 } else { 16 })
            .acquire_timeout(timeouts.query)
            // sqlx pings an idle connection before handing it out. A SQLite connection has no
            // socket that could have died while idle, and the ping is one more hand-off to its
            // worker thread: measured alone, a one-row read took 63 µs with it and 40 µs
            // without. PostgreSQL keeps it: a server restart or a proxy that closed
            // an idle connection is then found before a query fails on it.
            .test_before_acquire(backend == Backend::Postgres)
            .after_connect(move |conn, _meta| {
                let writer = connect_writer.clone();
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
                            own_moves::count_on_sqlite(conn, &writer).await?;
                            declared::watch_cached_tables(conn).await?;
                        }
                        Backend::Postgres => {
                            // The server ends a slow statement or a long wait on a row lock
                            // itself, which keeps the connection usable (see `deadlines`).
                            conn.execute(format!("SET statement_timeout = {server_side_ms}").as_str()).await?;
                            conn.execute(format!("SET lock_timeout = {server_side_ms}").as_str()).await?;
                            own_moves::count_on_postgres(conn, &writer).await?;
                        }
                    }
                    Ok(())
                })
            })
            .after_release(move |conn, _meta| {
                // A call given up on (its future dropped) returns its connection mid-query;
                // sqlx then pings it, unbounded. A silent socket would hold that pool slot until
                // the kernel gives up on it (minutes), so the ping gets the same deadline and a
                // connection that fails it is closed rather than reused. SQLite has no socket to
                // go silent, and the ping was one more hand-off to its worker thread on every
                // query, so only PostgreSQL connections are pinged.
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        return Ok(true);
                    }
                    match tokio::time::timeout(release_limit, conn.ping()).await {
                        Ok(Ok(())) => Ok(true),
                        Ok(Err(error)) => Err(error),
                        Err(_) => Err(deadlines::timed_out(release_limit)),
                    }
                })
            })
            .connect_with(options)
            .await?;
        Ok(Self {
            pool,
            backend,
            timeouts,
            queries: Default::default(),
            generations: Default::default(),
            grant_cache: Default::default(),
            approval_cache: std::sync::Arc::new(generation_cache::GenerationCache::new(gateway_consents::CAPACITY)),
            budget_shares: Default::default(),
            audit_queue: Default::default(),
            hot_writes: Default::default(),
            service_cache: std::sync::Arc::new(generation_cache::GenerationCache::new(services::CACHED)),
            unlocked_addresses: Default::default(),
            writer,
            webhook_targets: std::sync::Arc::new(generation_cache::GenerationCache::new(1)),
            webhook_wake: Default::default(),
        })
    }

    /// How many statements this store ran outside transactions (every read and write through
    /// [`cache_effect`]'s handles) since it was opened; tests count what one request costs.
    pub fn queries_run(&self) -> u64 {
        self.queries.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs a multi-statement unit (a transaction) within the same bound as one call; a
    /// transaction dropped on timeout is rolled back by sqlx when its connection is returned.
    pub(crate) async fn bounded<T>(&self, work: impl std::future::Future<Output = StoreResult<T>>) -> StoreResult<T> {
        let limit = self.timeouts.query;
        tokio::time::timeout(limit, work).await.unwrap_or_else(|_| Err(StoreError::from(deadlines::timed_out(limit))))
    }

    pub async fn migrate(&self) -> StoreResult<()> {
        match self.backend {
            Backend::Sqlite => {
                // On a connection of its own, closed after: it was opened before the schema
                // and counts none of this process's moves ([`own_moves`]).
                let mut conn = self.pool.acquire().await?;
                SQLITE_MIGRATIONS.run(&mut *conn).await?;
                let _ = conn.close().await;
                own_moves::forget_connections_older_than_the_schema(&self.pool).await;
            }
            Backend::Postgres => POSTGRES_MIGRATIONS.run(&self.pool).await?,
        }
        Ok(())
    }

    /// The migrations this binary knows for this database's kind, by version.
    pub fn known_migrations(&self) -> Vec<(i64, String)> {
        describe(match self.backend {
            Backend::Sqlite => &SQLITE_MIGRATIONS,
            Backend::Postgres => &POSTGRES_MIGRATIONS,
        })
    }

    /// The migrations recorded as run in this database (sqlx's `_sqlx_migrations`), by version,
    /// with whether each finished; empty when no migration ever ran here. Creates nothing.
    pub async fn applied_migrations(&self) -> StoreResult<Vec<AppliedMigration>> {
        // Whether a table exists is asked differently: SQLite has no information_schema.
        let exists = match self.backend {
            Backend::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
            Backend::Postgres => {
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = '_sqlx_migrations'"
            }
        };
        let (count,): (i64,) = sqlx::query_as(exists).fetch_one(self.pool()).await?;
        if count == 0 {
            return Ok(Vec::new());
        }
        // `success` is a BOOLEAN column, which SQLite stores as an integer: compare, don't decode.
        let rows: Vec<(i64, String, i64)> = sqlx::query_as(
            "SELECT version, description, CASE WHEN success THEN 1 ELSE 0 END FROM _sqlx_migrations ORDER BY version",
        )
        .fetch_all(self.pool())
        .await?;
        Ok(rows
            .into_iter()
            .map(|(version, description, success)| AppliedMigration { version, description, success: success != 0 })
            .collect())
    }

    /// On SQLite, a turn for one of the writes the token API makes at its own rate: the audit
    /// writer's batches and the request budget's leases. SQLite has one writer at a time, and a
    /// second one waits in its busy handler, which sleeps 1, 2, 5, … up to 100 ms between tries:
    /// a lease that kept meeting the audit writer's transactions slept hundreds of milliseconds,
    /// with every request of its service waiting on it (p99 0.2–0.5 s at 3,000 requests a
    /// second). Taking turns here, in order, a lease waits for at most the batch being written.
    /// PostgreSQL locks rows, not the database: no turn is needed there.
    pub(crate) async fn hot_write_turn(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match self.backend {
            Backend::Sqlite => Some(self.hot_writes.lock().await),
            Backend::Postgres => None,
        }
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The pool without the per-call deadline and without declaring any cache effect:
    /// migrations, backups, and tests that poke rows. Statements of the store itself run on
    /// the handles of [`cache_effect`].
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Closes the pool, first writing the audit events still queued ([`audit_queue`]) and
    /// removing this store's row of `auth_epoch_writers` ([`own_moves::forget_writer`]).
    pub async fn close(&self) {
        self.flush_audit_queue().await;
        if !self.pool.is_closed() {
            own_moves::forget_writer(&self.pool, &self.writer, self.timeouts.query).await;
        }
        self.pool.close().await;
    }

    /// SQLite: moves everything in the write-ahead log into the database file and truncates the
    /// log. Nothing to do on PostgreSQL.
    pub async fn checkpoint(&self) -> StoreResult<()> {
        if self.backend == Backend::Sqlite {
            // Moves pages between files; no row changes.
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(self.write(CacheEffect::Nothing)).await?;
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

/// The migrations a SQLite database gets, without one (`migrate --status` before the first run).
pub fn known_sqlite_migrations() -> Vec<(i64, String)> {
    describe(&SQLITE_MIGRATIONS)
}

fn describe(migrator: &Migrator) -> Vec<(i64, String)> {
    migrator.iter().map(|m| (m.version, m.description.to_string())).collect()
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

/// `$1, $2, …, $count`: the values of an `IN (…)` list, numbered as both backends read them
/// (the values are bound, never written into the SQL).
pub(crate) fn numbered_values(count: usize) -> String {
    (1..=count).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

fn create_sqlite_parent_dir(url: &str) {
    let Some(path) = sqlite_path(url) else { return };
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        let _ = std::fs::create_dir_all(parent);
    }
}

/// A migrated SQLite store in a temporary directory, for unit tests (the directory goes when the
/// returned guard is dropped).
#[cfg(test)]
pub(crate) async fn migrated_for_tests() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::connect(&format!("sqlite://{}/t.db?mode=rwc", dir.path().display())).await.unwrap();
    store.migrate().await.unwrap();
    (dir, store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_in_list_numbers_each_value_once_from_one() {
        assert_eq!(numbered_values(1), "$1");
        assert_eq!(numbered_values(3), "$1, $2, $3");
        assert_eq!(numbered_values(0), "");
    }

    #[test]
    fn migration_folders_have_the_same_versions() {
        let sqlite: Vec<_> = SQLITE_MIGRATIONS.iter().map(|m| (m.version, m.description.clone())).collect();
        let postgres: Vec<_> = POSTGRES_MIGRATIONS.iter().map(|m| (m.version, m.description.clone())).collect();
        assert_eq!(sqlite, postgres);
        assert!(!sqlite.is_empty());
    }

    #[test]
    fn a_database_that_did_not_answer_is_unavailable_and_a_bad_query_is_not() {
        assert!(StoreError::from(deadlines::timed_out(std::time::Duration::from_secs(1))).is_unavailable());
        assert!(StoreError::from(sqlx::Error::PoolTimedOut).is_unavailable());
        assert!(!StoreError::from(sqlx::Error::RowNotFound).is_unavailable());
        // Backend codes are classified in `unavailable` (its tests list them).
    }
}
