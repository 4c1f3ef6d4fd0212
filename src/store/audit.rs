//! An append-only record of what happened to grants and authorizations. Never holds a secret.

use super::{Store, StoreResult};
use crate::clock::Timestamp;

#[derive(Debug, Clone, sqlx::FromRow, serde::Serialize)]
pub struct AuditEntry {
    pub id: i64,
    pub at: i64,
    pub user_id: Option<String>,
    pub action: String,
    pub provider: Option<String>,
    pub detail: Option<String>,
}

impl Store {
    pub async fn audit(
        &self,
        at: Timestamp,
        user_id: Option<&str>,
        action: &str,
        provider: Option<&str>,
        detail: Option<&str>,
    ) -> StoreResult<()> {
        sqlx::query("INSERT INTO audit_log (at, user_id, action, provider, detail) VALUES ($1, $2, $3, $4, $5)")
            .bind(at)
            .bind(user_id)
            .bind(action)
            .bind(provider)
            .bind(detail)
            .execute(self.db())
            .await?;
        Ok(())
    }

    pub async fn audit_entries(&self, user_id: Option<&str>, limit: i64) -> StoreResult<Vec<AuditEntry>> {
        Ok(sqlx::query_as::<_, AuditEntry>(
            "SELECT id, at, user_id, action, provider, detail FROM audit_log WHERE ($1 IS NULL OR user_id = $1) ORDER BY id DESC LIMIT $2",
        )
        .bind(user_id)
        .bind(limit)
        .fetch_all(self.db())
        .await?)
    }
}
