//! Users: the pair (issuer, subject) is the identity; local accounts also have a username and
//! an argon2 password hash.

use crate::clock::Timestamp;
use crate::domain::{OrgRole, OrganizationId};
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::placeholders::numbered_values;
use crate::store::machinery::store::Store;

/// The handle on users, local and external: `store.users()`.
#[derive(Debug, Clone, Copy)]
pub struct Users<'s> {
    pub(in crate::store) store: &'s Store,
}

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

pub(in crate::store) const USER_COLUMNS: &str =
    "id, issuer, subject, username, password_hash, created_at, display_name, is_admin AS admin, disabled_at";

impl Users<'_> {
    /// Creates a local account in the default organization, as a member; its subject is its
    /// new id. `Conflict` if the name is taken.
    pub async fn create_local(
        self,
        issuer: &str,
        username: &str,
        password_hash: &str,
        now: Timestamp,
    ) -> StoreResult<User> {
        let default = OrganizationId::default_organization();
        self.create_local_in(&default, OrgRole::Member, issuer, username, password_hash, now).await
    }

    /// Creates a local account that joins `org` with `role`, in one transaction; its subject is
    /// its new id. `Conflict` if the name is taken.
    pub async fn create_local_in(
        self,
        org: &OrganizationId,
        role: OrgRole,
        issuer: &str,
        username: &str,
        password_hash: &str,
        now: Timestamp,
    ) -> StoreResult<User> {
        let id = uuid::Uuid::new_v4().to_string();
        let created = async {
            let mut tx = self.store.begin(CacheEffect::User(&id)).await?;
            sqlx::query(
                "INSERT INTO users (id, issuer, subject, username, password_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&id)
            .bind(issuer)
            .bind(&id)
            .bind(username)
            .bind(password_hash)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_write)?;
            join(&mut tx, org, &id, role, now).await?;
            tx.commit().await?;
            Ok::<_, StoreError>(())
        };
        self.store.bounded(created).await?;
        self.by_id(&id).await?.ok_or(StoreError::Corrupt("user vanished after insert".into()))
    }

    pub async fn by_id(self, id: &str) -> StoreResult<Option<User>> {
        Ok(sqlx::query_as::<_, User>(&format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1"))
            .bind(id)
            .fetch_optional_in(self.store.read())
            .await?)
    }

    pub async fn by_username(self, username: &str) -> StoreResult<Option<User>> {
        Ok(sqlx::query_as::<_, User>(&format!("SELECT {USER_COLUMNS} FROM users WHERE username = $1"))
            .bind(username)
            .fetch_optional_in(self.store.read())
            .await?)
    }

    pub async fn by_identity(self, issuer: &str, subject: &str) -> StoreResult<Option<User>> {
        Ok(sqlx::query_as::<_, User>(&format!("SELECT {USER_COLUMNS} FROM users WHERE issuer = $1 AND subject = $2"))
            .bind(issuer)
            .bind(subject)
            .fetch_optional_in(self.store.read())
            .await?)
    }

    pub async fn list(self) -> StoreResult<Vec<User>> {
        Ok(sqlx::query_as::<_, User>(&format!("SELECT {USER_COLUMNS} FROM users ORDER BY created_at, id"))
            .fetch_all_in(self.store.read())
            .await?)
    }

    pub async fn set_password_hash(self, user_id: &str, password_hash: &str) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2")
            .bind(password_hash)
            .bind(user_id)
            .execute(self.store.write(CacheEffect::User(user_id)))
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Marks a user admin or not; false if there is no such user.
    pub async fn set_admin(self, user_id: &str, admin: bool) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE users SET is_admin = $1 WHERE id = $2")
            .bind(i64::from(admin))
            .bind(user_id)
            .execute(self.store.write(CacheEffect::User(user_id)))
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Disables (`Some(now)`) or enables (`None`) a user; false if there is no such user.
    pub async fn set_disabled(self, user_id: &str, disabled_at: Option<Timestamp>) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE users SET disabled_at = $1 WHERE id = $2")
            .bind(disabled_at)
            .bind(user_id)
            .execute(self.store.write(CacheEffect::User(user_id)))
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The users with these ids (missing ones are left out), for naming a page's rows.
    pub async fn by_ids(self, ids: &[&str]) -> StoreResult<Vec<User>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE id IN ({})", numbered_values(ids.len()));
        let mut query = sqlx::query_as::<_, User>(&sql);
        for id in ids {
            query = query.bind(*id);
        }
        Ok(query.fetch_all_in(self.store.read()).await?)
    }
}

/// Within a user's creation: the user joins `org` with `role`.
pub(in crate::store) async fn join(
    tx: &mut crate::store::machinery::transaction::Transaction<'_>,
    org: &OrganizationId,
    user_id: &str,
    role: OrgRole,
    now: Timestamp,
) -> StoreResult<()> {
    sqlx::query("INSERT INTO memberships (organization_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)")
        .bind(org.as_str())
        .bind(user_id)
        .bind(role.as_str())
        .bind(now)
        .execute(&mut **tx)
        .await
        .map_err(StoreError::from_write)?;
    Ok(())
}
