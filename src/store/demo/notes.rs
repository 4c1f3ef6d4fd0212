//! The notes the demo provider's API serves, one account's each.

use crate::clock::Timestamp;
use crate::store::demo::tokens::Demo;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};

#[derive(Debug, Clone, sqlx::FromRow, serde::Serialize)]
pub struct DemoNoteRow {
    pub id: i64,
    #[serde(skip)]
    pub account: String,
    pub text: String,
    pub created_at: i64,
}

impl Demo<'_> {
    pub async fn notes(self, account: &str) -> StoreResult<Vec<DemoNoteRow>> {
        Ok(sqlx::query_as::<_, DemoNoteRow>(
            "SELECT id, account, text, created_at FROM demo_notes WHERE account = $1 ORDER BY id",
        )
        .bind(account)
        .fetch_all_in(self.store.read())
        .await?)
    }

    pub async fn insert_note(self, account: &str, text: &str, now: Timestamp) -> StoreResult<DemoNoteRow> {
        // RETURNING works on both SQLite (3.35+) and PostgreSQL, and avoids a racy re-read.
        sqlx::query_as::<_, DemoNoteRow>(
            "INSERT INTO demo_notes (account, text, created_at) VALUES ($1, $2, $3) RETURNING id, account, text, created_at",
        )
        .bind(account)
        .bind(text)
        .bind(now)
        .fetch_one(self.store.write(CacheEffect::Nothing))
        .await
        .map_err(StoreError::from_write)
    }
}

#[cfg(test)]
mod tests {

    use crate::store::migrated_for_tests as store;

    #[tokio::test]
    async fn notes_belong_to_one_account_in_insertion_order() {
        let (_dir, store) = store().await;
        let first = store.demo().insert_note("alice", "one", 10).await.unwrap();
        store.demo().insert_note("bob", "theirs", 11).await.unwrap();
        let second = store.demo().insert_note("alice", "two", 12).await.unwrap();

        let notes = store.demo().notes("alice").await.unwrap();
        assert_eq!(notes.iter().map(|n| n.text.as_str()).collect::<Vec<_>>(), ["one", "two"]);
        assert_eq!((notes[0].id, notes[1].id), (first.id, second.id));
        assert_eq!(second.created_at, 12);
    }
}
