//! Users: the pair (issuer, subject) is the identity; local accounts also have a username and
//! an argon2 password hash.

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::paging::{Cursor, ListSql, Paged, Search, Window};
use crate::store::machinery::placeholders::numbered_values;
use crate::store::machinery::search::{Indexed, TextIndex, Via};
use crate::store::machinery::store::{Backend, Store};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct User {
    pub id: String,
    pub issuer: String,
    pub subject: String,
    pub username: Option<String>,
    pub password_hash: Option<String>,
    pub created_at: i64,
    /// External users: the issuer's name for them, for display only (see migration 0004).
    pub display_name: Option<String>,
    /// 1: may open /admin (migration 0008). Read through [`User::is_admin`].
    pub admin: i64,
    /// When an admin disabled the account; a disabled user cannot sign in or use a token.
    pub disabled_at: Option<i64>,
}

impl User {
    /// A local account (created by `admin users add`, signs in with a password), as opposed
    /// to a user an OIDC issuer vouches for. Its `issuer` records the public URL the broker had
    /// when it was created; its identity is its id, whatever that URL is now.
    pub fn is_local(&self) -> bool {
        self.username.is_some()
    }

    pub fn is_admin(&self) -> bool {
        self.admin != 0
    }

    pub fn is_disabled(&self) -> bool {
        self.disabled_at.is_some()
    }
}

const USER_COLUMNS: &str =
    "id, issuer, subject, username, password_hash, created_at, display_name, is_admin AS admin, disabled_at";

impl Store {
    /// Creates a local account; its subject is its new id. `Conflict` if the name is taken.
    pub async fn create_local_user(
        &self,
        issuer: &str,
        username: &str,
        password_hash: &str,
        now: Timestamp,
    ) -> StoreResult<User> {
        let id = uuid::Uuid::new_v4().to_string();
        sqlx::query(
            "INSERT INTO users (id, issuer, subject, username, password_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&id)
        .bind(issuer)
        .bind(&id)
        .bind(username)
        .bind(password_hash)
        .bind(now)
        .execute(self.write(CacheEffect::User(&id)))
        .await
        .map_err(StoreError::from_write)?;
        self.user_by_id(&id).await?.ok_or(StoreError::Corrupt("user vanished after insert".into()))
    }

    pub async fn user_by_id(&self, id: &str) -> StoreResult<Option<User>> {
        Ok(sqlx::query_as::<_, User>(&format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1"))
            .bind(id)
            .fetch_optional_in(self.read())
            .await?)
    }

    pub async fn user_by_username(&self, username: &str) -> StoreResult<Option<User>> {
        Ok(sqlx::query_as::<_, User>(&format!("SELECT {USER_COLUMNS} FROM users WHERE username = $1"))
            .bind(username)
            .fetch_optional_in(self.read())
            .await?)
    }

    pub async fn user_by_identity(&self, issuer: &str, subject: &str) -> StoreResult<Option<User>> {
        Ok(sqlx::query_as::<_, User>(&format!("SELECT {USER_COLUMNS} FROM users WHERE issuer = $1 AND subject = $2"))
            .bind(issuer)
            .bind(subject)
            .fetch_optional_in(self.read())
            .await?)
    }

    pub async fn list_users(&self) -> StoreResult<Vec<User>> {
        Ok(sqlx::query_as::<_, User>(&format!("SELECT {USER_COLUMNS} FROM users ORDER BY created_at, id"))
            .fetch_all_in(self.read())
            .await?)
    }

    pub async fn set_password_hash(&self, user_id: &str, password_hash: &str) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2")
            .bind(password_hash)
            .bind(user_id)
            .execute(self.write(CacheEffect::User(user_id)))
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Marks a user admin or not; false if there is no such user.
    pub async fn set_admin(&self, user_id: &str, admin: bool) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE users SET is_admin = $1 WHERE id = $2")
            .bind(i64::from(admin))
            .bind(user_id)
            .execute(self.write(CacheEffect::User(user_id)))
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Disables (`Some(now)`) or enables (`None`) a user; false if there is no such user.
    pub async fn set_disabled(&self, user_id: &str, disabled_at: Option<Timestamp>) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE users SET disabled_at = $1 WHERE id = $2")
            .bind(disabled_at)
            .bind(user_id)
            .execute(self.write(CacheEffect::User(user_id)))
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

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

impl Store {
    /// Disables a user (at `now`), or demotes them from admin, unless (with
    /// [`AdminGuard::KeepOne`]) that leaves no enabled admin. The check and the change are one
    /// statement in one transaction. SQLite runs one writer at a time, so two such statements
    /// cannot interleave; PostgreSQL's READ COMMITTED would let two of them each see the other
    /// admin still enabled and both go through, so there the transaction first locks every
    /// enabled admin's row (in id order, so two of them cannot deadlock): the second waits for
    /// the first to commit, and its statement then sees the first's change.
    pub async fn disable_or_demote(
        &self,
        user_id: &str,
        change: AdminChange,
        guard: AdminGuard,
    ) -> StoreResult<Guarded> {
        self.bounded(self.disable_or_demote_unbounded(user_id, change, guard)).await
    }

    async fn disable_or_demote_unbounded(
        &self,
        user_id: &str,
        change: AdminChange,
        guard: AdminGuard,
    ) -> StoreResult<Guarded> {
        let mut tx = self.begin(CacheEffect::User(user_id)).await?;
        if guard == AdminGuard::KeepOne && self.backend() == Backend::Postgres {
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
}

/// A change [`Store::disable_or_demote`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminChange {
    /// Disabled from this time on.
    Disable(Timestamp),
    /// No longer an admin.
    Demote,
}

/// A user's name: username, display name, subject (other lists match rows by it).
pub const USER_NAMES: TextIndex = TextIndex {
    table: "users",
    text: "LOWER(COALESCE(username, '') || ' ' || COALESCE(display_name, '') || ' ' || subject)",
    fts: "users_search",
    column: "name",
    partial: None,
};

/// A row whose `user_id` names a user whose name holds the term matches.
pub const BY_USER_NAME: Via = Via { index: USER_NAMES, column: "user_id", prefix: 'u' };

/// What the admin users list searches: names, ids, issuer, role, status, kind (see `paging`).
const USER_TEXT: TextIndex = TextIndex {
    table: "users",
    text: "LOWER(COALESCE(username, '') || ' ' || COALESCE(display_name, '') || ' ' || subject || ' ' || id || ' ' || issuer || ' ' || CASE WHEN is_admin <> 0 THEN 'admin' ELSE 'user' END || ' ' || CASE WHEN disabled_at IS NULL THEN 'enabled' ELSE 'disabled' END || ' ' || CASE WHEN username IS NULL THEN 'external (oidc)' ELSE 'local account' END)",
    fts: "users_search",
    column: "text",
    partial: None,
};

impl Store {
    /// One page of users matching `search`, oldest first (the admin pages).
    pub async fn page_users(&self, search: &Search, window: Window) -> StoreResult<Paged<User>> {
        let sql = ListSql {
            columns: USER_COLUMNS,
            from: "users",
            filter: "",
            indexed: Some(Indexed { own: USER_TEXT, via: &[], extra: Vec::new() }),
            chosen: None,
            order: "created_at, id",
            after: "(created_at, id) > ({k}, {i})",
        };
        self.paged(sql, search, None, window, |u: &User| Cursor::new(u.created_at, u.id.clone())).await
    }

    /// The users with these ids (missing ones are left out), for naming a page's rows.
    /// Whether an enabled admin other than `user_id` exists (the `users_admins` index).
    pub async fn another_enabled_admin(&self, user_id: &str) -> StoreResult<bool> {
        let found: Option<(String,)> =
            sqlx::query_as("SELECT id FROM users WHERE is_admin <> 0 AND disabled_at IS NULL AND id <> $1 LIMIT 1")
                .bind(user_id)
                .fetch_optional_in(self.read())
                .await?;
        Ok(found.is_some())
    }

    pub async fn users_by_ids(&self, ids: &[&str]) -> StoreResult<Vec<User>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE id IN ({})", numbered_values(ids.len()));
        let mut query = sqlx::query_as::<_, User>(&sql);
        for id in ids {
            query = query.bind(*id);
        }
        Ok(query.fetch_all_in(self.read()).await?)
    }
}
