//! The schema: `migrations/sqlite` and `migrations/postgres`, numbered the same (a test checks
//! the two lists match), run by [`Store::migrate`] and listed for `migrate --status`.

use sqlx::Executor;
use sqlx::migrate::Migrator;

use crate::store::machinery::error::StoreResult;
use crate::store::machinery::own_moves;
use crate::store::machinery::store::{Backend, Store};

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/postgres");

/// A row of sqlx's migration table, for `migrate --status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedMigration {
    pub version: i64,
    pub description: String,
    /// False when the migration started and failed (sqlx then refuses to go on).
    pub success: bool,
}

impl Store {
    pub async fn migrate(&self) -> StoreResult<()> {
        match self.backend() {
            Backend::Sqlite => {
                // On a connection of its own, closed after: it was opened before the schema
                // and counts none of this process's moves ([`own_moves`]).
                let mut conn = self.pool().acquire().await?;
                SQLITE_MIGRATIONS.run(&mut *conn).await?;
                let _ = conn.close().await;
                own_moves::forget_connections_older_than_the_schema(self.pool()).await;
            }
            Backend::Postgres => {
                // A migration may read or rewrite a whole table (0023, 0028, 0039: seconds to
                // minutes on millions of rows), which the per-statement deadline every pooled
                // connection carries for requests would cancel. It runs on a connection of its
                // own without that deadline, closed after, so the pool never hands out a
                // connection without one.
                let mut conn = self.pool().acquire().await?;
                conn.execute("SET statement_timeout = 0").await?;
                let ran = POSTGRES_MIGRATIONS.run(&mut *conn).await;
                let _ = conn.close().await;
                ran?;
            }
        }
        Ok(())
    }

    /// The migrations this binary knows for this database's kind, by version.
    pub fn known_migrations(&self) -> Vec<(i64, String)> {
        describe(match self.backend() {
            Backend::Sqlite => &SQLITE_MIGRATIONS,
            Backend::Postgres => &POSTGRES_MIGRATIONS,
        })
    }

    /// The migrations recorded as run in this database (sqlx's `_sqlx_migrations`), by version,
    /// with whether each finished; empty when no migration ever ran here. Creates nothing.
    pub async fn applied_migrations(&self) -> StoreResult<Vec<AppliedMigration>> {
        // Whether a table exists is asked differently: SQLite has no information_schema.
        let exists = match self.backend() {
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
}

/// The migrations a SQLite database gets, without one (`migrate --status` before the first run).
pub fn known_sqlite_migrations() -> Vec<(i64, String)> {
    describe(&SQLITE_MIGRATIONS)
}

fn describe(migrator: &Migrator) -> Vec<(i64, String)> {
    migrator.iter().map(|m| (m.version, m.description.to_string())).collect()
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
}
