//! The demo provider's registered clients besides the broker's own (`demo_clients`, migration
//! 0040): what `admin demo add-client` makes, so each organization can try its own app. The
//! secret is kept as its SHA-256, as the demo provider keeps its tokens.

use crate::clock::Timestamp;
use crate::store::demo::tokens::Demo;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};

/// One registered client.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DemoClientRow {
    pub client_id: String,
    pub name: String,
    pub secret_hash: String,
    pub created_at: i64,
}

impl Demo<'_> {
    /// Registers a client. `Conflict` if the id is taken.
    pub async fn add_client(self, client_id: &str, name: &str, secret_hash: &str, now: Timestamp) -> StoreResult<()> {
        sqlx::query("INSERT INTO demo_clients (client_id, name, secret_hash, created_at) VALUES ($1, $2, $3, $4)")
            .bind(client_id)
            .bind(name)
            .bind(secret_hash)
            .bind(now)
            .execute(self.store.write(CacheEffect::Nothing))
            .await
            .map_err(StoreError::from_write)?;
        Ok(())
    }

    pub async fn client(self, client_id: &str) -> StoreResult<Option<DemoClientRow>> {
        Ok(sqlx::query_as::<_, DemoClientRow>(
            "SELECT client_id, name, secret_hash, created_at FROM demo_clients WHERE client_id = $1",
        )
        .bind(client_id)
        .fetch_optional_in(self.store.read())
        .await?)
    }

    /// Every registered client, oldest first (a demo has a handful).
    pub async fn clients(self) -> StoreResult<Vec<DemoClientRow>> {
        Ok(sqlx::query_as::<_, DemoClientRow>(
            "SELECT client_id, name, secret_hash, created_at FROM demo_clients ORDER BY created_at, client_id LIMIT 1000",
        )
        .fetch_all_in(self.store.read())
        .await?)
    }
}
