//! Users vouched for by an external OpenID Connect issuer (`[identity] mode = "oidc"`): the pair
//! (issuer, subject) is the identity, created the first time the issuer presents it. They have
//! no username (usernames are local accounts' sign-in names; an issuer's `preferred_username`
//! is not unique and must never shadow one) and no password.

use crate::clock::Timestamp;
use crate::domain::{OrgRole, OrganizationId};
use crate::store::machinery::cache_effect::CacheEffect;
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::users::accounts::Users;
use crate::store::users::accounts::{User, join};

impl Users<'_> {
    /// The user (issuer, subject), created on first sight. Safe under concurrency: two first
    /// requests racing both end up with the same row (`ON CONFLICT DO NOTHING`, then read back),
    /// on SQLite and PostgreSQL alike.
    pub async fn upsert_external(self, issuer: &str, subject: &str, now: Timestamp) -> StoreResult<User> {
        if let Some(user) = self.by_identity(issuer, subject).await? {
            return Ok(user);
        }
        let id = uuid::Uuid::new_v4().to_string();
        let created = async {
            let mut tx = self.store.begin(CacheEffect::User(&id)).await?;
            let inserted = sqlx::query(
                "INSERT INTO users (id, issuer, subject, username, password_hash, created_at) VALUES ($1, $2, $3, NULL, NULL, $4) \
                 ON CONFLICT (issuer, subject) DO NOTHING",
            )
            .bind(&id)
            .bind(issuer)
            .bind(subject)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_write)?;
            // Only the request that created the user makes them a member: the deployment's own
            // issuer vouches for people of the default organization.
            if inserted.rows_affected() == 1 {
                join(&mut tx, &OrganizationId::default_organization(), &id, OrgRole::Member, now).await?;
            }
            tx.commit().await?;
            Ok::<_, StoreError>(())
        };
        self.store.bounded(created).await?;
        self.by_identity(issuer, subject).await?.ok_or(StoreError::Corrupt("user vanished after upsert".into()))
    }

    /// Records the issuer's current display name for a user (at browser sign-in; the caller
    /// writes only when it changed).
    pub async fn set_display_name(self, user_id: &str, display_name: Option<&str>) -> StoreResult<()> {
        sqlx::query("UPDATE users SET display_name = $1 WHERE id = $2")
            .bind(display_name)
            .bind(user_id)
            .execute(self.store.write(CacheEffect::User(user_id)))
            .await?;
        Ok(())
    }
}
