//! `oauth-broker admin backup FILE`: a consistent copy of a SQLite database (PostgreSQL is backed
//! up with its own tools), and a reminder that the encryption key goes with it.

use std::path::Path;

use anyhow::Context;

use crate::state::AppState;

pub(super) async fn backup(state: &AppState, file: &Path) -> anyhow::Result<()> {
    if state.core.store.backend() == crate::store::Backend::Postgres {
        anyhow::bail!(
            "the database is PostgreSQL: back it up with `pg_dump --format=custom DATABASE_URL > FILE` \
             (restore with `pg_restore`), and keep the encryption key with it"
        );
    }
    if file.exists() {
        anyhow::bail!("{} already exists; choose a new file (nothing was written)", file.display());
    }
    state.core.store.backup_to(file).await.with_context(|| format!("writing the copy to {}", file.display()))?;
    let key = state.core.config.data_dir.join("encryption.key");
    println!("database copied to {}", file.display());
    if state.core.config.encryption_key.is_none() {
        println!("also back up {} — without it the copy's tokens cannot be read", key.display());
    } else {
        println!(
            "also back up the encryption key (OAUTH_BROKER_ENCRYPTION_KEY) — without it the copy's tokens cannot be read"
        );
    }
    Ok(())
}
