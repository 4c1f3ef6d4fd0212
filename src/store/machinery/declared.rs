//! Debug builds check on SQLite what the types of [`super::cache_effect`] cannot: that a statement
//! fetched through `Reads` changed no row at all, and that one declared
//! [`CacheEffect::Nothing`](super::cache_effect::CacheEffect::Nothing) changed no row a cache
//! reads. Neither looks at SQL text; both ask the connection the statement ran on, before and after
//! it:
//! - every row change: SQLite's `total_changes()`;
//! - a change the caches rest on: a TEMP counter of the connection, moved by TEMP triggers
//!   made beside each `auth_epoch_*` trigger of the schema (the list [`super::own_moves`]
//!   copies too, so the tables checked are the ones whose changes move `auth_epoch`).
//!
//! A statement that breaks its declaration panics in a debug build, naming its SQL. The tests
//! run debug builds on SQLite, so every path they take is checked; a release build, or
//! PostgreSQL, reads nothing more.

use sqlx::{AnyConnection, Executor};

use crate::store::machinery::own_moves::{EpochTrigger, epoch_triggers};

/// Whether statements on this connection are checked.
fn checked(conn: &AnyConnection) -> bool {
    cfg!(debug_assertions) && conn.backend_name() == "SQLite"
}

/// Debug builds, SQLite: the connection's TEMP counter of changes to the tables the caches read,
/// and its triggers. Called as each connection opens; before the migrations there are no
/// triggers to copy, and the connection is replaced after them
/// ([`super::own_moves::forget_connections_older_than_the_schema`]).
pub(super) async fn watch_cached_tables(conn: &mut AnyConnection) -> Result<(), sqlx::Error> {
    if !checked(conn) {
        return Ok(());
    }
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS cached_changes (n INTEGER NOT NULL)").await?;
    conn.execute("INSERT INTO temp.cached_changes (n) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM temp.cached_changes)")
        .await?;
    for EpochTrigger { name, table, event } in epoch_triggers(conn).await? {
        conn.execute(
            format!(
                // SQLite allows no schema name in a trigger's body: `cached_changes` is the
                // TEMP one.
                "CREATE TEMP TRIGGER IF NOT EXISTS seen_{name} AFTER {event} ON main.{table} \
                 BEGIN UPDATE cached_changes SET n = n + 1; END"
            )
            .as_str(),
        )
        .await?;
    }
    Ok(())
}

/// A count read before a statement, to compare after it (`None`: not checked here).
#[derive(Debug, Clone, Copy)]
pub(super) struct Before {
    count: Option<i64>,
    what: Counted,
}

#[derive(Debug, Clone, Copy)]
enum Counted {
    /// Every row change (a read).
    AnyChange,
    /// Changes of what the caches read (a write declared to change nothing cached).
    CachedChange,
}

impl Counted {
    fn sql(self) -> &'static str {
        match self {
            Counted::AnyChange => "SELECT total_changes()",
            Counted::CachedChange => "SELECT COALESCE((SELECT n FROM temp.cached_changes), 0)",
        }
    }
}

/// Before a read: every row change so far.
pub(super) async fn before_read(conn: &mut AnyConnection) -> Before {
    before(conn, Counted::AnyChange).await
}

/// Before a write: for one that declared it changes nothing cached
/// (`CacheEffect::Nothing`), changes of cached rows so far; a write that names whose rows it
/// changes is not checked.
pub(super) async fn before_write(conn: &mut AnyConnection, declared_nothing: bool) -> Before {
    if declared_nothing {
        before(conn, Counted::CachedChange).await
    } else {
        Before { count: None, what: Counted::CachedChange }
    }
}

async fn before(conn: &mut AnyConnection, what: Counted) -> Before {
    let count = if checked(conn) { count(conn, what).await } else { None };
    Before { count, what }
}

async fn count(conn: &mut AnyConnection, what: Counted) -> Option<i64> {
    // A count that cannot be read is not checked: the check must never fail a call itself.
    sqlx::query_as::<_, (i64,)>(what.sql()).fetch_one(&mut *conn).await.ok().map(|(n,)| n)
}

/// After the statement `sql`: panics (debug builds) when it changed what it declared it would
/// not.
pub(super) async fn after(conn: &mut AnyConnection, before: Before, sql: &str) {
    let Some(then) = before.count else { return };
    let Some(now) = count(conn, before.what).await else { return };
    debug_assert!(
        now == then,
        "{}: {sql}",
        match before.what {
            Counted::AnyChange => "a statement fetched through Reads changed rows (declare a write handle)",
            Counted::CachedChange => "a statement declared CacheEffect::Nothing changed rows the caches read",
        }
    );
}

#[cfg(test)]
mod tests {
    use crate::store::{CacheEffect, FetchIn, Store};

    async fn store_with_user() -> (tempfile::TempDir, Store, String) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}/t.db?mode=rwc", dir.path().display())).await.unwrap();
        store.migrate().await.unwrap();
        let user = store.users().create_local("http://issuer", "alice", "hash", 1).await.unwrap().id;
        (dir, store, user)
    }

    #[tokio::test]
    #[should_panic(expected = "a statement fetched through Reads changed rows")]
    async fn a_write_fetched_through_the_read_handle_is_caught() {
        let (_dir, store, alice) = store_with_user().await;
        let returning =
            sqlx::query_as::<_, (String,)>("UPDATE users SET display_name = 'x' WHERE id = $1 RETURNING id");
        let _ = returning.bind(&alice).fetch_optional_in(store.read()).await;
    }

    #[tokio::test]
    #[should_panic(expected = "a statement declared CacheEffect::Nothing changed rows the caches read")]
    async fn a_write_to_a_cached_table_declared_nothing_is_caught() {
        let (_dir, store, alice) = store_with_user().await;
        let update = sqlx::query("UPDATE users SET display_name = 'x' WHERE id = $1").bind(&alice);
        let _ = update.execute(store.write(CacheEffect::Nothing)).await;
    }

    #[tokio::test]
    #[should_panic(expected = "a statement declared CacheEffect::Nothing changed rows the caches read")]
    async fn a_transaction_declared_nothing_that_changes_a_cached_table_is_caught() {
        let (_dir, store, alice) = store_with_user().await;
        let mut tx = store.begin(CacheEffect::Nothing).await.unwrap();
        sqlx::query("UPDATE users SET display_name = 'x' WHERE id = $1").bind(&alice).execute(&mut *tx).await.unwrap();
        let _ = tx.commit().await;
    }

    #[tokio::test]
    async fn declared_writes_and_plain_reads_pass() {
        let (_dir, store, alice) = store_with_user().await;
        sqlx::query("INSERT INTO audit_log (at, action) VALUES (1, 'test')")
            .execute(store.write(CacheEffect::Nothing))
            .await
            .unwrap();
        sqlx::query("UPDATE users SET display_name = 'x' WHERE id = $1")
            .bind(&alice)
            .execute(store.write(CacheEffect::User(&alice)))
            .await
            .unwrap();
        let name: (Option<String>,) = sqlx::query_as("SELECT display_name FROM users WHERE id = $1")
            .bind(&alice)
            .fetch_one_in(store.read())
            .await
            .unwrap();
        assert_eq!(name.0.as_deref(), Some("x"));
    }
}
