//! Organizations: an opaque id rows carry, a slug operators type, a name people read.

use std::collections::HashMap;

use crate::clock::Timestamp;
use crate::domain::{OrgRole, OrgSlug, OrganizationId};
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::paging::{Cursor, ListSql, Paged, Search, Window};
use crate::store::machinery::placeholders::numbered_values;
use crate::store::machinery::store::Store;

/// The handle on organizations: `store.organizations()`.
#[derive(Debug, Clone, Copy)]
pub struct Organizations<'s> {
    pub(in crate::store) store: &'s Store,
}

/// One organization's rooms: `store.in_org(&id)`. Every statement reached through it is scoped
/// to that organization; there is no other way to reach them.
#[derive(Debug, Clone, Copy)]
pub struct InOrg<'s> {
    pub(in crate::store) store: &'s Store,
    pub(in crate::store) org: &'s OrganizationId,
}

impl<'s> InOrg<'s> {
    pub fn id(&self) -> &'s OrganizationId {
        self.org
    }
}

/// An organization as the rest of the broker sees it: parsed once, here.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Organization {
    pub id: OrganizationId,
    pub slug: OrgSlug,
    pub name: String,
    pub created_at: Timestamp,
}

#[derive(sqlx::FromRow)]
struct RawOrganization {
    id: String,
    slug: String,
    name: String,
    created_at: i64,
}

impl TryFrom<RawOrganization> for Organization {
    type Error = StoreError;

    fn try_from(raw: RawOrganization) -> StoreResult<Self> {
        let slug =
            OrgSlug::parse(&raw.slug).map_err(|e| StoreError::Corrupt(format!("organization {}: {e}", raw.id)))?;
        Ok(Organization { id: OrganizationId::from_stored(raw.id), slug, name: raw.name, created_at: raw.created_at })
    }
}

const COLUMNS: &str = "id, slug, name, created_at";

const SEARCH: &str = "LOWER(slug || ' ' || name || ' ' || id) LIKE {q} ESCAPE '\\'";

/// The most organizations one user is shown as belonging to (a user in more is a mistake
/// somewhere; the list stays bounded all the same).
pub const MAX_OF_ONE_USER: i64 = 1000;

impl Organizations<'_> {
    /// The organization `user_id` joined first (by the time of joining, then id): where the
    /// user's own MCP clients act until they choose another. `None` for a user in none.
    pub async fn home_of(self, user_id: &str) -> StoreResult<Option<OrganizationId>> {
        let row: Option<(String,)> = sqlx::query_as(
            "SELECT organization_id FROM memberships WHERE user_id = $1 ORDER BY created_at, organization_id LIMIT 1",
        )
        .bind(user_id)
        .fetch_optional_in(self.store.read())
        .await?;
        Ok(row.map(|(id,)| OrganizationId::from_stored(id)))
    }

    /// A new organization. `Conflict` if the slug is taken.
    pub async fn create(self, slug: &OrgSlug, name: &str, now: Timestamp) -> StoreResult<Organization> {
        let id = OrganizationId::generate();
        sqlx::query("INSERT INTO organizations (id, slug, name, created_at) VALUES ($1, $2, $3, $4)")
            .bind(id.as_str())
            .bind(slug.as_str())
            .bind(name)
            .bind(now)
            .execute(self.store.write(CacheEffect::Nothing))
            .await
            .map_err(StoreError::from_write)?;
        Ok(Organization { id, slug: slug.clone(), name: name.to_owned(), created_at: now })
    }

    pub async fn by_slug(self, slug: &OrgSlug) -> StoreResult<Option<Organization>> {
        self.one_where("slug", slug.as_str()).await
    }

    pub async fn by_id(self, id: &OrganizationId) -> StoreResult<Option<Organization>> {
        self.one_where("id", id.as_str()).await
    }

    /// The organization every upgraded database's rows are in, and new users join by default.
    pub async fn default_organization(self) -> StoreResult<Organization> {
        self.by_id(&OrganizationId::default_organization())
            .await?
            .ok_or_else(|| StoreError::Corrupt("the default organization (migration 0039) is missing".into()))
    }

    /// `column` is one of the literals above, never input.
    async fn one_where(self, column: &'static str, value: &str) -> StoreResult<Option<Organization>> {
        sqlx::query_as::<_, RawOrganization>(&format!("SELECT {COLUMNS} FROM organizations WHERE {column} = $1"))
            .bind(value)
            .fetch_optional_in(self.store.read())
            .await?
            .map(Organization::try_from)
            .transpose()
    }

    /// Renames an organization (its slug and id stay). False if there is none.
    pub async fn rename(self, id: &OrganizationId, name: &str) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE organizations SET name = $1 WHERE id = $2")
            .bind(name)
            .bind(id.as_str())
            .execute(self.store.write(CacheEffect::Nothing))
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// One page of organizations matching `search`, by slug (the operator's list).
    pub async fn page(self, search: &Search, window: Window) -> StoreResult<Paged<Organization>> {
        let sql = ListSql {
            columns: COLUMNS,
            from: "organizations",
            filter: SEARCH,
            indexed: None,
            chosen: None,
            order: "slug",
            after: "slug > {i}",
        };
        let key = |o: &RawOrganization| Cursor::new(0, o.slug.clone());
        self.store.paged(sql, search, None, window, key).await?.try_map(Organization::try_from)
    }

    /// The slugs of these organizations, for lists that show whose each row is: one read,
    /// however many rows name them. An id that names no organization is left out.
    pub async fn slugs_of(self, ids: &[&OrganizationId]) -> StoreResult<HashMap<OrganizationId, OrgSlug>> {
        let mut distinct: Vec<&str> = ids.iter().map(|id| id.as_str()).collect();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.is_empty() {
            return Ok(HashMap::new());
        }
        let sql = format!("SELECT {COLUMNS} FROM organizations WHERE id IN ({})", numbered_values(distinct.len()));
        let mut query = sqlx::query_as::<_, RawOrganization>(&sql);
        for id in distinct {
            query = query.bind(id);
        }
        query
            .fetch_all_in(self.store.read())
            .await?
            .into_iter()
            .map(|raw| Organization::try_from(raw).map(|org| (org.id, org.slug)))
            .collect()
    }

    /// The organizations `user_id` belongs to, with the role in each, by slug.
    pub async fn of_user(self, user_id: &str) -> StoreResult<Vec<(Organization, OrgRole)>> {
        #[derive(sqlx::FromRow)]
        struct Row {
            #[sqlx(flatten)]
            org: RawOrganization,
            role: String,
        }
        let rows = sqlx::query_as::<_, Row>(
            "SELECT o.id, o.slug, o.name, o.created_at, m.role FROM memberships m \
             JOIN organizations o ON o.id = m.organization_id WHERE m.user_id = $1 ORDER BY o.slug LIMIT $2",
        )
        .bind(user_id)
        .bind(MAX_OF_ONE_USER)
        .fetch_all_in(self.store.read())
        .await?;
        rows.into_iter()
            .map(|row| {
                let role = OrgRole::parse(&row.role).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                Ok((Organization::try_from(row.org)?, role))
            })
            .collect()
    }
}
