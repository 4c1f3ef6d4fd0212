//! Copies of a SQLite database: its write-ahead log moved into the file, and a consistent copy
//! made while others keep using it (`admin backup`). Nothing to do on PostgreSQL, whose own
//! tools copy it.

use crate::store::machinery::cache_effect::CacheEffect;
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::store::{Backend, Store};

impl Store {
    /// SQLite: moves everything in the write-ahead log into the database file and truncates the
    /// log. Nothing to do on PostgreSQL.
    pub async fn checkpoint(&self) -> StoreResult<()> {
        if self.backend() == Backend::Sqlite {
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
