//! Admins: who may open `/admin`, and the changes that must leave at least one enabled admin
//! (disabling or demoting one), checked and made in one statement.

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::store::Backend;
use crate::store::users::accounts::Users;

/// What a change that could leave no enabled admin may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminGuard {
    /// Refused when the user is an enabled admin and no other enabled admin is left.
    KeepOne,
    /// Done anyway (`--force`).
    Force,
}

/// What a guarded change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guarded {
    Done,
    /// Nothing changed: the user is the last enabled admin.
    LastAdmin,
    NoSuchUser,
}

/// The condition a guarded change adds: the row is no enabled admin, or another one exists.
const ANOTHER_ENABLED_ADMIN: &str = "(is_admin = 0 OR disabled_at IS NOT NULL OR EXISTS \
     (SELECT 1 FROM users other WHERE other.is_admin <> 0 AND other.disabled_at IS NULL AND other.id <> $1))";

impl Users<'_> {
    /// Disables a user (at `now`), or demotes them from admin, unless (with
    /// [`AdminGuard::KeepOne`]) that leaves no enabled admin. The check and the change are one
    /// statement in one transaction. SQLite runs one writer at a time, so two such statements
    /// cannot interleave; PostgreSQL's READ COMMITTED would let two of them each see the other
    /// admin still enabled and both go through, so there the transaction first locks every
    /// enabled admin's row (in id order, so two of them cannot deadlock): the second waits for
    /// the first to commit, and its statement then sees the first's change.
    pub async fn disable_or_demote(
        self,
        user_id: &str,
        change: AdminChange,
        guard: AdminGuard,
    ) -> StoreResult<Guarded> {
        self.store.bounded(self.disable_or_demote_unbounded(user_id, change, guard)).await
    }

    async fn disable_or_demote_unbounded(
        self,
        user_id: &str,
        change: AdminChange,
        guard: AdminGuard,
    ) -> StoreResult<Guarded> {
        let mut tx = self.store.begin(CacheEffect::User(user_id)).await?;
        if guard == AdminGuard::KeepOne && self.store.backend() == Backend::Postgres {
            sqlx::query("SELECT id FROM users WHERE is_admin <> 0 AND disabled_at IS NULL ORDER BY id FOR UPDATE")
                .execute(&mut *tx)
                .await?;
        }
        let condition = match guard {
            AdminGuard::KeepOne => format!(" AND {ANOTHER_ENABLED_ADMIN}"),
            AdminGuard::Force => String::new(),
        };
        let sql = match change {
            AdminChange::Disable(_) => format!("UPDATE users SET disabled_at = $2 WHERE id = $1{condition}"),
            AdminChange::Demote => format!("UPDATE users SET is_admin = 0 WHERE id = $1{condition}"),
        };
        let mut query = sqlx::query(&sql).bind(user_id);
        if let AdminChange::Disable(now) = change {
            query = query.bind(now);
        }
        let done = query.execute(&mut *tx).await?;
        if done.rows_affected() == 1 {
            tx.commit().await?;
            return Ok(Guarded::Done);
        }
        let exists: Option<(String,)> =
            sqlx::query_as("SELECT id FROM users WHERE id = $1").bind(user_id).fetch_optional(&mut *tx).await?;
        tx.rollback().await?;
        Ok(if exists.is_some() { Guarded::LastAdmin } else { Guarded::NoSuchUser })
    }

    /// Whether an enabled admin other than `user_id` exists (the `users_admins` index).
    pub async fn another_enabled_admin(self, user_id: &str) -> StoreResult<bool> {
        let found: Option<(String,)> =
            sqlx::query_as("SELECT id FROM users WHERE is_admin <> 0 AND disabled_at IS NULL AND id <> $1 LIMIT 1")
                .bind(user_id)
                .fetch_optional_in(self.store.read())
                .await?;
        Ok(found.is_some())
    }
}

/// A change [`Users::disable_or_demote`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminChange {
    /// Disabled from this time on.
    Disable(Timestamp),
    /// No longer an admin.
    Demote,
}
