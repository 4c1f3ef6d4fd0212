//! One organization's people: who is a member, with which role. Reached only through
//! [`InOrg::members`], so every statement here names its organization.

use crate::clock::Timestamp;
use crate::domain::{OrgRole, OrganizationId};
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::counts::{COUNT_CAP, Count};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::generation_cache::GenerationCache;
use crate::store::machinery::kept::Kept;
use crate::store::machinery::paging::{Cursor, Paged, Window};
use crate::store::machinery::store::Store;
use crate::store::organizations::orgs::InOrg;
use crate::store::users::accounts::User;

/// The handle on one organization's members: `store.in_org(&org).members()`.
#[derive(Debug, Clone, Copy)]
pub struct Members<'s> {
    store: &'s Store,
    org: &'s OrganizationId,
}

impl<'s> InOrg<'s> {
    pub fn members(self) -> Members<'s> {
        Members { store: self.store, org: self.org }
    }
}

/// A member as the organization's lists show them.
#[derive(Debug, Clone)]
pub struct Member {
    pub user: User,
    pub role: OrgRole,
    pub joined_at: Timestamp,
}

/// What [`Members::add`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joined {
    Added,
    /// The user was a member already, with this role (unchanged).
    Already(OrgRole),
    NoSuchUser,
}

/// At most this many (organization, user) answers are kept; a full cache starts over.
const CACHED: usize = 100_000;

/// Roles by (organization, user), as every token-API request asks. Only members are kept: a
/// user who joins is never answered "not a member" from here.
struct RoleCache(GenerationCache<(OrganizationId, String), OrgRole>);

impl Default for RoleCache {
    fn default() -> Self {
        Self(GenerationCache::new(CACHED))
    }
}

impl Kept for RoleCache {}

#[derive(sqlx::FromRow)]
struct RawMember {
    #[sqlx(flatten)]
    user: User,
    role: String,
    joined_at: i64,
}

impl TryFrom<RawMember> for Member {
    type Error = StoreError;

    fn try_from(raw: RawMember) -> StoreResult<Self> {
        let role = OrgRole::parse(&raw.role).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(Member { user: raw.user, role, joined_at: raw.joined_at })
    }
}

impl Members<'_> {
    /// Makes `user_id` a member with `role`; a member already keeps their role.
    pub async fn add(self, user_id: &str, role: OrgRole, now: Timestamp) -> StoreResult<Joined> {
        let done = sqlx::query(
            "INSERT INTO memberships (organization_id, user_id, role, created_at) \
             SELECT $1, id, $2, $3 FROM users WHERE id = $4 ON CONFLICT (organization_id, user_id) DO NOTHING",
        )
        .bind(self.org.as_str())
        .bind(role.as_str())
        .bind(now)
        .bind(user_id)
        .execute(self.store.write(CacheEffect::Nothing))
        .await
        .map_err(StoreError::from_write)?;
        if done.rows_affected() == 1 {
            return Ok(Joined::Added);
        }
        // A member already, or no such user.
        Ok(match self.role_of(user_id).await? {
            Some(role) => Joined::Already(role),
            None => Joined::NoSuchUser,
        })
    }

    /// Changes a member's role. False if `user_id` is not a member.
    pub async fn set_role(self, user_id: &str, role: OrgRole) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE memberships SET role = $1 WHERE organization_id = $2 AND user_id = $3")
            .bind(role.as_str())
            .bind(self.org.as_str())
            .bind(user_id)
            .execute(self.store.write(CacheEffect::Everyone))
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Removes a member (their user stays, and their other organizations). What the
    /// organization's services had of them goes in the same transaction: the user's open
    /// authorizations those services caused end (failed, `left_organization`), so a link sent
    /// before cannot be finished for them afterwards, and the user's consents to those
    /// services are withdrawn, so rejoining asks again. False if `user_id` was not a member.
    pub async fn remove(self, user_id: &str, now: Timestamp) -> StoreResult<bool> {
        let services = "SELECT 'service:' || id FROM services WHERE organization_id = $2";
        let mut tx = self.store.begin(CacheEffect::Everyone).await?;
        let done = sqlx::query("DELETE FROM memberships WHERE organization_id = $1 AND user_id = $2")
            .bind(self.org.as_str())
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(&format!(
            "UPDATE authorizations SET status = 'failed', failure = 'left_organization', pkce_verifier_sealed = NULL, \
             state_hash = NULL, updated_at = $3 WHERE user_id = $1 AND status IN ('pending', 'redirected') \
             AND client_key IN ({services})"
        ))
        .bind(user_id)
        .bind(self.org.as_str())
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query(&format!("DELETE FROM client_consents WHERE user_id = $1 AND client_key IN ({services})"))
            .bind(user_id)
            .bind(self.org.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// `user_id`'s role here, or `None` if they are not a member. Kept under everyone's cache
    /// generation: a removal or a changed role anywhere moves it (migration 0039's triggers).
    pub async fn role_of(self, user_id: &str) -> StoreResult<Option<OrgRole>> {
        let cache = self.store.kept::<RoleCache>();
        let key = (self.org.clone(), user_id.to_owned());
        if let Some(role) = cache.0.get(&key, |_| self.store.cache_shared_generation()) {
            return Ok(Some(role));
        }
        let before = self.store.cache_tick();
        let row: Option<(String,)> =
            sqlx::query_as("SELECT role FROM memberships WHERE organization_id = $1 AND user_id = $2")
                .bind(self.org.as_str())
                .bind(user_id)
                .fetch_optional_in(self.store.read())
                .await?;
        let role =
            row.map(|(role,)| OrgRole::parse(&role).map_err(|e| StoreError::Corrupt(e.to_string()))).transpose()?;
        if let (Some(before), Some(role)) = (before, role) {
            cache.0.insert(before, self.store.cache_shared_generation(), key, role);
        }
        Ok(role)
    }

    /// One page of members, oldest first (the `memberships_page` index).
    pub async fn page(self, window: Window) -> StoreResult<Paged<Member>> {
        let after = if window.after.is_some() { " AND (m.created_at, m.user_id) > ($2, $3)" } else { "" };
        let limit = if window.after.is_some() { "$4" } else { "$2" };
        let sql = format!(
            "SELECT u.id, u.issuer, u.subject, u.username, u.password_hash, u.created_at, u.display_name, \
             u.is_admin AS admin, u.disabled_at, m.role, m.created_at AS joined_at \
             FROM memberships m JOIN users u ON u.id = m.user_id \
             WHERE m.organization_id = $1{after} ORDER BY m.created_at, m.user_id LIMIT {limit}"
        );
        let mut query = sqlx::query_as::<_, RawMember>(&sql).bind(self.org.as_str());
        if let Some(cursor) = &window.after {
            query = query.bind(cursor.key).bind(cursor.id.clone());
        }
        let mut rows = query.bind(window.limit.saturating_add(1)).fetch_all_in(self.store.read()).await?;
        let more = i64::try_from(rows.len()).unwrap_or(i64::MAX) > window.limit;
        rows.truncate(usize::try_from(window.limit).unwrap_or(usize::MAX));
        let next = more.then(|| rows.last().map(|m| Cursor::new(m.joined_at, m.user.id.clone()))).flatten();
        Ok(Paged { rows: rows.into_iter().map(Member::try_from).collect::<StoreResult<_>>()?, next })
    }

    /// How many members, exact up to [`COUNT_CAP`].
    pub async fn count(self) -> StoreResult<Count> {
        let (n,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM (SELECT 1 FROM memberships WHERE organization_id = $1 LIMIT $2) capped",
        )
        .bind(self.org.as_str())
        .bind(COUNT_CAP + 1)
        .fetch_one_in(self.store.read())
        .await?;
        Ok(if n > COUNT_CAP { Count::AtLeast(COUNT_CAP) } else { Count::Exact(n) })
    }
}
