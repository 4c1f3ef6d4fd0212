//! The access-decision counter (migration 0012): moved by triggers whenever a user, an
//! authorization of the broker's own authorization server or a client's consent changes; read
//! before using anything cached from those tables (see [`crate::identity::bearer_cache`]).

use super::{Store, StoreResult};

impl Store {
    /// The counter's current value.
    pub async fn auth_epoch(&self) -> StoreResult<i64> {
        let (n,): (i64,) = sqlx::query_as("SELECT n FROM auth_epoch WHERE id = 1").fetch_one(self.db()).await?;
        Ok(n)
    }
}
