//! The [`Store`] handle itself: one pool over SQLite (embedded default) or PostgreSQL, chosen by
//! the URL, with what every statement runs through (its deadline, the caches' generations, this
//! process's writer id) and what the rooms keep in memory ([`super::kept`]).
//!
//! sqlx's `Any` driver lets one set of runtime queries serve both: every query is a single SQL
//! string with `$1` placeholders (SQLite reads `$N` as positional too), timestamps are integer
//! Unix seconds bound from Rust, and blobs are `BLOB`/`BYTEA`. Where SQL must differ the
//! migrations differ, never the queries. One-time values (state, codes, refresh leases) are
//! consumed with compare-and-swap updates that check rows affected, which is correct on one
//! instance or many.

use std::str::FromStr;
use std::sync::Arc;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Connection, Executor};

use crate::store::machinery::deadlines::{self, DatabaseTimeouts};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::generations::Generations;
use crate::store::machinery::kept::{Kept, KeptValues};
use crate::store::machinery::{declared, own_moves};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Cheap to clone: a handle on the pool.
#[derive(Debug, Clone)]
pub struct Store {
    pub(super) pool: AnyPool,
    pub(super) backend: Backend,
    pub(super) timeouts: DatabaseTimeouts,
    /// Statements run outside transactions since start (what a tool call costs).
    pub(super) queries: Arc<std::sync::atomic::AtomicU64>,
    /// Whether what was read earlier may still be used ([`super::generations`]).
    pub(super) generations: Arc<Generations>,
    /// Turns of the writes the token API makes at its own rate, on SQLite
    /// ([`Store::hot_write_turn`]).
    hot_writes: Arc<tokio::sync::Mutex<()>>,
    /// This store's id among the writers that move `auth_epoch` ([`super::own_moves`]).
    pub(super) writer: Arc<str>,
    /// What the rooms keep in memory beside their rows: caches, queues, leased shares.
    kept: Arc<KeptValues>,
}

impl Store {
    /// Connects (creating the SQLite file and its directory if needed); does not migrate.
    pub async fn connect(database_url: &str) -> StoreResult<Self> {
        Self::connect_with(database_url, DatabaseTimeouts::default()).await
    }

    /// [`Store::connect`] with the bound on each database call ([`super::deadlines`] explains
    /// the layers).
    pub async fn connect_with(database_url: &str, timeouts: DatabaseTimeouts) -> StoreResult<Self> {
        sqlx::any::install_default_drivers();
        let backend = if database_url.starts_with("sqlite:") { Backend::Sqlite } else { Backend::Postgres };
        if backend == Backend::Sqlite {
            create_sqlite_parent_dir(database_url);
        }
        let options = AnyConnectOptions::from_str(database_url)?;
        let writer: Arc<str> = uuid::Uuid::new_v4().to_string().into();
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
            hot_writes: Default::default(),
            writer,
            kept: Default::default(),
        })
    }

    /// How many statements this store ran outside transactions (every read and write through
    /// [`super::cache_effect`]'s handles) since it was opened; tests count what one request
    /// costs.
    pub fn queries_run(&self) -> u64 {
        self.queries.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The one `T` a room keeps in memory for this store and every clone of it, made on first
    /// use ([`super::kept`]).
    pub(in crate::store) fn kept<T: Kept + Default>(&self) -> Arc<T> {
        self.kept.get::<T>()
    }

    /// Runs a multi-statement unit (a transaction) within the same bound as one call; a
    /// transaction dropped on timeout is rolled back by sqlx when its connection is returned.
    pub(crate) async fn bounded<T>(&self, work: impl std::future::Future<Output = StoreResult<T>>) -> StoreResult<T> {
        let limit = self.timeouts.query;
        tokio::time::timeout(limit, work).await.unwrap_or_else(|_| Err(StoreError::from(deadlines::timed_out(limit))))
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
    /// the handles of [`super::cache_effect`].
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Closes the pool, first letting what the rooms keep finish its work (the audit events
    /// still queued, `crate::store::token_api`) and removing this store's row of
    /// `auth_epoch_writers` ([`own_moves::forget_writer`]).
    pub async fn close(&self) {
        for kept in self.kept.all() {
            kept.before_close().await;
        }
        if !self.pool.is_closed() {
            own_moves::forget_writer(&self.pool, &self.writer, self.timeouts.query).await;
        }
        self.pool.close().await;
    }

    /// The same database and caches' generations as another instance would see them, with its
    /// own memory ([`super::kept`]): what two instances on one database share and do not.
    #[cfg(test)]
    pub(crate) fn beside_with_own_memory(&self) -> Self {
        Self { kept: Default::default(), ..self.clone() }
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

/// A migrated SQLite store in a temporary directory, for unit tests (the directory goes when the
/// returned guard is dropped).
#[cfg(test)]
pub(crate) async fn migrated_for_tests() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::connect(&format!("sqlite://{}/t.db?mode=rwc", dir.path().display())).await.unwrap();
    store.migrate().await.unwrap();
    (dir, store)
}
