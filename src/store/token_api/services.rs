//! Registered tool servers ("services") that use the token API (`src/api/`); created by
//! `admin services add`. A service's client id is `svc_<name>`, its secret is stored only as a
//! [`SecretHash`], and for consent it is the client [`ClientIdentity::Service`], so its consents
//! are the `client_consents` rows keyed `service:<client id>`: removing a service removes them.

use crate::store::machinery::paging::{Cursor, ListSql, Paged, Search, Window};
use std::collections::BTreeSet;

use url::Url;

use crate::clock::Timestamp;
use crate::crypto::SecretHash;
use crate::domain::{ClientIdentity, OrganizationId, ProviderId};
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::counts::Count;
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::generation_cache::GenerationCache;
use crate::store::machinery::kept::Kept;
use crate::store::machinery::store::Store;

/// The handle on the token API's services: `store.services()`.
#[derive(Debug, Clone, Copy)]
pub struct Services<'s> {
    pub(in crate::store) store: &'s Store,
}

/// At most this many services are kept by [`Services::by_id`]; a full cache starts over.
pub const CACHED: usize = 10_000;

/// Services by client id, as every token-API request reads them.
struct ServiceCache(GenerationCache<String, ServiceRow>);

impl Default for ServiceCache {
    fn default() -> Self {
        Self(GenerationCache::new(CACHED))
    }
}

impl Kept for ServiceCache {}

/// The prefix that makes a service name its client id.
pub const CLIENT_ID_PREFIX: &str = crate::domain::SERVICE_CLIENT_ID_PREFIX;

/// A service as the rest of the broker sees it: parsed once, here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRow {
    /// The client id, `svc_<name>`.
    pub id: String,
    /// 1-64 of a-z 0-9 - _ (the [`ProviderId`] rule).
    pub name: String,
    /// The providers whose tokens the service may ask for.
    pub providers: BTreeSet<ProviderId>,
    /// The audience users' access tokens must name for this service (RFC 8707), if registered.
    pub resource: Option<Url>,
    /// Only through the proxy (`/v1/proxy/…`), never a raw token.
    pub proxy_only: bool,
    /// May name a user by id instead of presenting the user's access token.
    pub trusted: bool,
    pub secret_hash: SecretHash,
    /// The organization it belongs to: it acts only for that organization's members.
    pub organization: OrganizationId,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl ServiceRow {
    /// `svc_<name>`.
    pub fn client_id_for(name: &str) -> String {
        format!("{CLIENT_ID_PREFIX}{name}")
    }

    /// The name inside a client id (the id itself if it is not a service's).
    pub fn name_of_client_id(client_id: &str) -> &str {
        client_id.strip_prefix(CLIENT_ID_PREFIX).unwrap_or(client_id)
    }

    /// Who the service is to consent checks.
    pub fn client(&self) -> ClientIdentity {
        ClientIdentity::Service(self.id.clone())
    }

    /// Whether the service was given `provider`.
    pub fn allows(&self, provider: &ProviderId) -> bool {
        self.providers.contains(provider)
    }
}

/// The row as stored; read only through [`ServiceRow::try_from`].
#[derive(sqlx::FromRow)]
struct RawServiceRow {
    id: String,
    name: String,
    providers: String,
    resource: Option<String>,
    proxy_only: i64,
    trusted: i64,
    secret_hash: String,
    organization_id: String,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl TryFrom<RawServiceRow> for ServiceRow {
    type Error = StoreError;

    fn try_from(raw: RawServiceRow) -> Result<Self, Self::Error> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("service {:?} has {what}", raw.id));
        if ProviderId::parse(&raw.name).is_err() || raw.id != ServiceRow::client_id_for(&raw.name) {
            return Err(corrupt("a malformed name or an id that does not match it"));
        }
        let providers = raw
            .providers
            .split_whitespace()
            .map(ProviderId::parse)
            .collect::<Result<BTreeSet<_>, _>>()
            .map_err(|_| corrupt("a malformed provider list"))?;
        if providers.is_empty() {
            return Err(corrupt("no providers"));
        }
        let resource = match &raw.resource {
            Some(text) => Some(Url::parse(text).map_err(|_| corrupt("a malformed resource"))?),
            None => None,
        };
        let flag = |value: i64| match value {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(corrupt("a flag that is neither 0 nor 1")),
        };
        let proxy_only = flag(raw.proxy_only)?;
        let trusted = flag(raw.trusted)?;
        let secret_hash =
            SecretHash::from_stored(raw.secret_hash.clone()).ok_or_else(|| corrupt("a malformed secret hash"))?;
        Ok(ServiceRow {
            id: raw.id,
            name: raw.name,
            providers,
            resource,
            proxy_only,
            trusted,
            secret_hash,
            organization: OrganizationId::from_stored(raw.organization_id),
            created_at: raw.created_at,
            updated_at: raw.updated_at,
        })
    }
}

/// What `admin services add` registers; the caller has validated every field.
#[derive(Debug, Clone)]
pub struct NewService<'a> {
    pub name: &'a str,
    pub providers: &'a BTreeSet<ProviderId>,
    pub resource: Option<&'a Url>,
    pub proxy_only: bool,
    pub trusted: bool,
    pub secret_hash: &'a SecretHash,
    /// The organization it joins (the caller found it).
    pub organization: &'a OrganizationId,
}

const SERVICE_COLUMNS: &str =
    "id, name, providers, resource, proxy_only, trusted, secret_hash, organization_id, created_at, updated_at";

fn space_separated(providers: &BTreeSet<ProviderId>) -> String {
    providers.iter().map(ProviderId::as_str).collect::<Vec<_>>().join(" ")
}

impl Services<'_> {
    /// Every service, for the dashboard (bounded: [`crate::store::machinery::counts`]).
    pub(in crate::store) async fn count(self) -> StoreResult<Count> {
        self.store.capped_count("services", None, 0).await
    }

    /// Registers a service; [`StoreError::Conflict`] if the name (hence the id) is taken.
    pub async fn create(self, new: &NewService<'_>, now: Timestamp) -> StoreResult<ServiceRow> {
        let row = ServiceRow {
            id: ServiceRow::client_id_for(new.name),
            name: new.name.to_owned(),
            providers: new.providers.clone(),
            resource: new.resource.cloned(),
            proxy_only: new.proxy_only,
            trusted: new.trusted,
            secret_hash: new.secret_hash.clone(),
            organization: new.organization.clone(),
            created_at: now,
            updated_at: now,
        };
        sqlx::query(&format!(
            "INSERT INTO services ({SERVICE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)"
        ))
        .bind(&row.id)
        .bind(&row.name)
        .bind(space_separated(&row.providers))
        .bind(row.resource.as_ref().map(Url::as_str))
        .bind(i64::from(row.proxy_only))
        .bind(i64::from(row.trusted))
        .bind(row.secret_hash.as_str())
        .bind(row.organization.as_str())
        .bind(now)
        .execute(self.store.write(CacheEffect::Nothing))
        .await
        .map_err(StoreError::from_write)?;
        Ok(row)
    }

    /// The service with this client id (`svc_<name>`). Every token-API request reads it, so it is
    /// kept under everyone's generation ([`crate::store::machinery::generations`]): a rotated
    /// secret or a removed service moves it at once here (the writes below say so) and within the
    /// watcher's interval on every other instance (migration 0019's triggers). An unknown id is not
    /// kept.
    pub async fn by_id(self, id: &str) -> StoreResult<Option<ServiceRow>> {
        let cache = self.store.kept::<ServiceCache>();
        if let Some(row) = cache.0.get(id, |_| self.store.cache_shared_generation()) {
            return Ok(Some(row));
        }
        let before = self.store.cache_tick();
        let row = self.service_where("id", id).await?;
        if let (Some(before), Some(row)) = (before, &row) {
            cache.0.insert(before, self.store.cache_shared_generation(), row.id.clone(), row.clone());
        }
        Ok(row)
    }

    pub async fn by_name(self, name: &str) -> StoreResult<Option<ServiceRow>> {
        self.service_where("name", name).await
    }

    /// The service registered with this resource URL (as stored: [`url::Url`]'s serialisation),
    /// if any: the audience the broker's authorization server may put in a user's token.
    pub async fn by_resource(self, resource: &str) -> StoreResult<Option<ServiceRow>> {
        self.service_where("resource", resource).await
    }

    /// `column` is one of the literals above, never input. The first match, by name, so a
    /// resource registered twice (refused by `admin services add`) answers predictably.
    async fn service_where(self, column: &'static str, value: &str) -> StoreResult<Option<ServiceRow>> {
        sqlx::query_as::<_, RawServiceRow>(&format!(
            "SELECT {SERVICE_COLUMNS} FROM services WHERE {column} = $1 ORDER BY name LIMIT 1"
        ))
        .bind(value)
        .fetch_optional_in(self.store.read())
        .await?
        .map(ServiceRow::try_from)
        .transpose()
    }

    /// Every service, by name.
    pub async fn list(self) -> StoreResult<Vec<ServiceRow>> {
        sqlx::query_as::<_, RawServiceRow>(&format!("SELECT {SERVICE_COLUMNS} FROM services ORDER BY name"))
            .fetch_all_in(self.store.read())
            .await?
            .into_iter()
            .map(ServiceRow::try_from)
            .collect()
    }

    /// Replaces the service's secret hash: the old secret stops working at once. False if
    /// there is no service by that name.
    pub async fn rotate_secret(self, name: &str, new_hash: &SecretHash, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE services SET secret_hash = $1, updated_at = $2 WHERE name = $3")
            .bind(new_hash.as_str())
            .bind(now)
            .bind(name)
            // Services are kept under everyone's generation (`Services::by_id`).
            .execute(self.store.write(CacheEffect::Everyone))
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Removes the service with its consents, in one transaction; `None` if there was no such
    /// service, else how many consents went with it. Its unfinished authorizations are failed in
    /// the same transaction: their completion is a compare-and-swap on the status
    /// (`Authorizations::finish`, `Authorizations::allow_client`), so none can record a consent for
    /// the removed client afterwards, which a service re-added under the same name would inherit.
    pub async fn remove(self, name: &str, now: Timestamp) -> StoreResult<Option<u64>> {
        self.store.bounded(self.remove_unbounded(name, now)).await
    }

    /// [`Services::remove`] without the bound.
    async fn remove_unbounded(self, name: &str, now: Timestamp) -> StoreResult<Option<u64>> {
        let client_key = ClientIdentity::Service(ServiceRow::client_id_for(name)).key();
        // The removed client's consents are any number of users'.
        let mut tx = self.store.begin(CacheEffect::Everyone).await?;
        let removed = sqlx::query("DELETE FROM services WHERE name = $1").bind(name).execute(&mut *tx).await?;
        if removed.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(None);
        }
        self.store.authorizations().fail_open_of_client(&mut tx, &client_key, "client_removed", now).await?;
        let consents = self.store.consents().delete_for_client(&mut tx, &client_key).await?;
        tx.commit().await?;
        Ok(Some(consents))
    }
}

/// What the admin services list searches (see `paging`).
const SEARCH_SERVICES: &str =
    "LOWER(name || ' ' || id || ' ' || providers || ' ' || COALESCE(resource, '')) LIKE {q} ESCAPE '\\'";

impl Services<'_> {
    /// One page of tool-server services matching `search`, by name.
    pub async fn page(self, search: &Search, window: Window) -> StoreResult<Paged<ServiceRow>> {
        let sql = ListSql {
            columns: SERVICE_COLUMNS,
            from: "services",
            filter: SEARCH_SERVICES,
            indexed: None,
            chosen: None,
            order: "name",
            after: "name > {i}",
        };
        let key = |s: &RawServiceRow| Cursor::new(0, s.name.clone());
        self.store.paged(sql, search, None, window, key).await?.try_map(ServiceRow::try_from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::migrated_for_tests as store;

    fn providers(ids: &[&str]) -> BTreeSet<ProviderId> {
        ids.iter().map(|id| ProviderId::parse(id).unwrap()).collect()
    }

    #[tokio::test]
    async fn a_service_round_trips_typed_and_its_name_is_unique() {
        let (_dir, store) = store().await;
        let set = providers(&["github", "demo"]);
        let resource = Url::parse("https://tools.example/mcp").unwrap();
        let hash = SecretHash::of("obs_secret");
        let new = NewService {
            name: "notes",
            providers: &set,
            resource: Some(&resource),
            proxy_only: true,
            trusted: false,
            secret_hash: &hash,
            organization: &crate::domain::OrganizationId::default_organization(),
        };
        let created = store.services().create(&new, 100).await.unwrap();
        assert_eq!(created.id, "svc_notes");
        assert_eq!(store.services().by_id("svc_notes").await.unwrap().as_ref(), Some(&created));
        assert_eq!(store.services().by_name("notes").await.unwrap().as_ref(), Some(&created));
        assert!(created.allows(&ProviderId::parse("demo").unwrap()));
        assert!(!created.allows(&ProviderId::parse("slack").unwrap()));
        assert!(matches!(store.services().create(&new, 101).await, Err(StoreError::Conflict)));
        assert_eq!(store.services().list().await.unwrap(), vec![created]);
        assert!(store.services().by_id("notes").await.unwrap().is_none(), "the name is not the id");
    }

    #[tokio::test]
    async fn nonsense_in_the_table_is_reported_as_corrupt() {
        let (_dir, store) = store().await;
        let hash = SecretHash::of("s");
        for (id, name, providers, resource, flag, secret_hash) in [
            ("svc_a", "a", "", None, 0, hash.as_str()),
            ("svc_b", "b", "GitHub", None, 0, hash.as_str()),
            ("svc_c", "c", "demo", Some("not a url"), 0, hash.as_str()),
            ("svc_d", "d", "demo", None, 2, hash.as_str()),
            ("svc_e", "e", "demo", None, 0, "plaintext"),
            ("svc_x", "f", "demo", None, 0, hash.as_str()),
        ] {
            sqlx::query(&format!(
                "INSERT INTO services ({SERVICE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, 0, $6, 'org_default', 1, 1)"
            ))
            .bind(id)
            .bind(name)
            .bind(providers)
            .bind(resource)
            .bind(flag)
            .bind(secret_hash)
            .execute(store.pool())
            .await
            .unwrap();
            assert!(matches!(store.services().by_name(name).await, Err(StoreError::Corrupt(_))), "{name}");
        }
        assert!(matches!(store.services().list().await, Err(StoreError::Corrupt(_))));
    }

    #[tokio::test]
    async fn rotating_and_removing_name_services_that_may_not_exist() {
        let (_dir, store) = store().await;
        let set = providers(&["demo"]);
        let old = SecretHash::of("old");
        let new = NewService {
            name: "n",
            providers: &set,
            resource: None,
            proxy_only: false,
            trusted: true,
            secret_hash: &old,
            organization: &crate::domain::OrganizationId::default_organization(),
        };
        store.services().create(&new, 1).await.unwrap();
        assert!(store.services().rotate_secret("n", &SecretHash::of("new"), 2).await.unwrap());
        let row = store.services().by_name("n").await.unwrap().unwrap();
        assert!(row.secret_hash.verify("new") && !row.secret_hash.verify("old"));
        assert_eq!((row.created_at, row.updated_at), (1, 2));
        assert!(!store.services().rotate_secret("missing", &old, 3).await.unwrap());
        assert_eq!(store.services().remove("n", 4).await.unwrap(), Some(0));
        assert_eq!(store.services().remove("n", 5).await.unwrap(), None);
        assert!(store.services().by_name("n").await.unwrap().is_none());
    }
}
