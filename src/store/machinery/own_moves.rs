//! This process's own moves of the `auth_epoch` counter, counted apart (migration
//! 0016), so the watcher in [`super::generations`] reacts only to other processes' changes: this
//! process's writes have moved its caches' generations already, and a second move up to one poll
//! later emptied them again for nothing.
//!
//! Every connection of the pool says which writer it is, the way its backend lets a trigger know:
//! - PostgreSQL: the session setting `oauth_broker.writer`, which the `bump_auth_epoch()` trigger
//!   function (0016) reads to count the move in `auth_epoch_writers` as well;
//! - SQLite has no session setting a trigger could read, so the connection adds TEMP triggers —
//!   its own, gone when it closes — beside each `auth_epoch_*` trigger of the schema, for the same
//!   table and event, that count in this writer's row. They are made from the schema's own list,
//!   so a trigger a later migration adds is counted too.
//!
//! A move this count misses (a connection opened before the schema had the table; a trigger whose
//! event is not recognised) is taken for another process's: one more refill, never a stale answer.

use sqlx::{AnyConnection, AnyPool, Executor};

/// PostgreSQL: names this connection's writer for the trigger function.
pub(super) async fn count_on_postgres(conn: &mut AnyConnection, writer: &str) -> Result<(), sqlx::Error> {
    // A uuid: nothing to escape (set_config takes no bind parameters through `execute`'s
    // simple protocol, and `SET` none at all).
    conn.execute(format!("SET oauth_broker.writer = '{}'", plain(writer)?).as_str()).await?;
    Ok(())
}

/// SQLite: adds this connection's counting triggers, if the schema has the table they write.
pub(super) async fn count_on_sqlite(conn: &mut AnyConnection, writer: &str) -> Result<(), sqlx::Error> {
    let writer = plain(writer)?;
    let (tables,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'auth_epoch_writers'")
            .fetch_one(&mut *conn)
            .await?;
    if tables == 0 {
        // Before migration 0016: [`forget_connections_older_than_the_schema`] closes this one.
        return Ok(());
    }
    for EpochTrigger { name, table, event } in epoch_triggers(conn).await? {
        conn.execute(
            format!(
                "CREATE TEMP TRIGGER IF NOT EXISTS own_{name} AFTER {event} ON main.{table} \
                 BEGIN INSERT INTO auth_epoch_writers (writer, n) VALUES ('{writer}', 1) \
                 ON CONFLICT (writer) DO UPDATE SET n = n + 1; END"
            )
            .as_str(),
        )
        .await?;
    }
    Ok(())
}

/// SQLite: closes the idle connections, so that those opened before the migrations created the
/// table (they count nothing) are replaced by ones that count. (One still on its way back to the
/// pool is missed: its moves look like another process's until it closes — refills only.)
pub(super) async fn forget_connections_older_than_the_schema(pool: &AnyPool) {
    while let Some(conn) = pool.try_acquire() {
        let _ = conn.close().await;
    }
}

/// Removes `writer`'s row of `auth_epoch_writers`, as its store closes. Only its own process
/// reads a writer's count, so the row of a process that has stopped is never read again, and
/// rows piled up: one per server start and per admin command that wrote. (A process that dies
/// without closing leaves its row: a few bytes, never read.) Bounded by `limit`; a failure is
/// only logged: the schema may predate the table (a database being migrated), and nothing
/// depends on the row being gone.
pub(super) async fn forget_writer(pool: &AnyPool, writer: &str, limit: std::time::Duration) {
    let delete = sqlx::query("DELETE FROM auth_epoch_writers WHERE writer = $1").bind(writer).execute(pool);
    match tokio::time::timeout(limit, delete).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => tracing::debug!(%error, "could not remove this process's auth_epoch_writers row"),
        Err(_) => tracing::debug!("removing this process's auth_epoch_writers row took too long"),
    }
}

/// One of the schema's `auth_epoch_*` triggers (SQLite), with names safe to splice into SQL.
pub(super) struct EpochTrigger {
    pub(super) name: String,
    pub(super) table: String,
    pub(super) event: &'static str,
}

/// The schema's `auth_epoch_*` triggers (SQLite): the changes the caches rest on. A trigger
/// whose event is not recognised, or whose names are not plain, is left out.
pub(super) async fn epoch_triggers(conn: &mut AnyConnection) -> Result<Vec<EpochTrigger>, sqlx::Error> {
    let triggers: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'auth_epoch_%'",
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(triggers
        .into_iter()
        .filter_map(|(name, table, sql)| {
            let (event, name, table) = (event_of(&sql)?, plain(&name).ok()?, plain(&table).ok()?);
            Some(EpochTrigger { name: name.to_owned(), table: table.to_owned(), event })
        })
        .collect())
}

/// The event of an `AFTER INSERT|UPDATE|DELETE ON` trigger, as its SQL names it.
fn event_of(sql: &str) -> Option<&'static str> {
    let mut words = sql.split_whitespace();
    words.find(|w| w.eq_ignore_ascii_case("after"))?;
    let word = words.next()?;
    let event = ["INSERT", "UPDATE", "DELETE"].into_iter().find(|e| word.eq_ignore_ascii_case(e))?;
    // `UPDATE OF column` fires for fewer statements than a plain `UPDATE` would: not copied.
    words.next().filter(|w| w.eq_ignore_ascii_case("on")).map(|_| event)
}

/// `word` if it is safe to splice into SQL as a name or a literal (letters, digits, `_`, `-`).
fn plain(word: &str) -> Result<&str, sqlx::Error> {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        Ok(word)
    } else {
        Err(sqlx::Error::Protocol(format!("not a plain name: {word:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_event_of_each_schema_trigger_is_read_and_anything_else_is_not_copied() {
        assert_eq!(event_of("CREATE TRIGGER a AFTER UPDATE ON users\nBEGIN x; END"), Some("UPDATE"));
        assert_eq!(event_of("create trigger a after delete on grants begin x; end"), Some("DELETE"));
        assert_eq!(event_of("CREATE TRIGGER a AFTER INSERT ON client_consents BEGIN"), Some("INSERT"));
        assert_eq!(event_of("CREATE TRIGGER a AFTER UPDATE OF status ON grants BEGIN"), None);
        assert_eq!(event_of("CREATE TRIGGER a BEFORE UPDATE ON grants BEGIN"), None);
        assert!(plain("auth_epoch_grants_insert").is_ok());
        assert!(plain("x'; DROP TABLE users; --").is_err());
    }
}
