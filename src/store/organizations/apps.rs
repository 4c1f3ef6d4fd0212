//! One organization's own OAuth apps, one per provider at a time: reached only through
//! [`InOrg::provider_apps`], so every statement here names its organization.
//!
//! Every change is a new version (a row). A version never changes afterwards — only its
//! `retired_at` is set, when a newer one replaces it or the organization removes it, and
//! `admin keys rewrap` re-seals its secret (same plaintext) — so a version can be kept in
//! memory for as long as anyone likes, and a grant that names one always means the same client.

use std::collections::BTreeMap;

use crate::clock::Timestamp;
use crate::domain::{OrganizationId, Scopes};
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::store::Store;
use crate::store::organizations::orgs::InOrg;

/// The handle on one organization's apps: `store.in_org(&org).provider_apps()`.
#[derive(Debug, Clone, Copy)]
pub struct ProviderApps<'s> {
    store: &'s Store,
    org: &'s OrganizationId,
}

impl<'s> InOrg<'s> {
    pub fn provider_apps(self) -> ProviderApps<'s> {
        ProviderApps { store: self.store, org: self.org }
    }
}

/// One version of an organization's app at a provider.
#[derive(Clone)]
pub struct ProviderApp {
    /// `app_` and 32 hex digits; what grants and authorizations name.
    pub id: String,
    pub organization: OrganizationId,
    pub provider: String,
    /// 1, 2, … per (organization, provider).
    pub version: i64,
    pub client_id: String,
    /// Sealed for this row and organization; `None` for a public client.
    pub client_secret_sealed: Option<Vec<u8>>,
    /// `None`: the operator's default scopes.
    pub scopes: Option<Scopes>,
    /// The catalogue entry's template values (`tenant`, `domain`, …).
    pub template_values: BTreeMap<String, String>,
    pub created_at: Timestamp,
    pub retired_at: Option<Timestamp>,
}

impl std::fmt::Debug for ProviderApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderApp")
            .field("id", &self.id)
            .field("organization", &self.organization)
            .field("provider", &self.provider)
            .field("version", &self.version)
            .field("client_id", &self.client_id)
            .field("has_secret", &self.client_secret_sealed.is_some())
            .finish_non_exhaustive()
    }
}

/// A new version to store; its secret is already sealed for `id`.
#[derive(Debug, Clone, Copy)]
pub struct NewProviderApp<'a> {
    pub id: &'a str,
    pub provider: &'a str,
    pub client_id: &'a str,
    pub client_secret_sealed: Option<&'a [u8]>,
    pub scopes: Option<&'a Scopes>,
    pub template_values: &'a BTreeMap<String, String>,
}

#[derive(sqlx::FromRow)]
struct RawProviderApp {
    id: String,
    organization_id: String,
    provider: String,
    version: i64,
    client_id: String,
    client_secret_sealed: Option<Vec<u8>>,
    scopes: Option<String>,
    template_values: String,
    created_at: i64,
    retired_at: Option<i64>,
}

impl TryFrom<RawProviderApp> for ProviderApp {
    type Error = StoreError;

    fn try_from(raw: RawProviderApp) -> StoreResult<Self> {
        let corrupt = |what: String| StoreError::Corrupt(format!("provider app {:?}: {what}", raw.id));
        let scopes =
            raw.scopes.as_deref().map(Scopes::from_space_separated).transpose().map_err(|e| corrupt(e.to_string()))?;
        let template_values = serde_json::from_str(&raw.template_values).map_err(|e| corrupt(e.to_string()))?;
        Ok(ProviderApp {
            id: raw.id,
            organization: OrganizationId::from_stored(raw.organization_id),
            provider: raw.provider,
            version: raw.version,
            client_id: raw.client_id,
            client_secret_sealed: raw.client_secret_sealed,
            scopes,
            template_values,
            created_at: raw.created_at,
            retired_at: raw.retired_at,
        })
    }
}

const COLUMNS: &str = "id, organization_id, provider, version, client_id, client_secret_sealed, scopes, template_values, created_at, retired_at";

impl ProviderApps<'_> {
    /// Stores `new` as the version in use at its provider, retiring the one before (if any), in
    /// one transaction. Two admins setting it at once: one wins, the other gets `Conflict`.
    pub async fn set(self, new: &NewProviderApp<'_>, now: Timestamp) -> StoreResult<ProviderApp> {
        let template_values =
            serde_json::to_string(new.template_values).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut tx = self.store.begin(CacheEffect::Nothing).await?;
        sqlx::query(
            "UPDATE provider_apps SET retired_at = $1 WHERE organization_id = $2 AND provider = $3 AND retired_at IS NULL",
        )
        .bind(now)
        .bind(self.org.as_str())
        .bind(new.provider)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO provider_apps (id, organization_id, provider, version, client_id, client_secret_sealed, scopes, template_values, created_at) \
             SELECT $1, $2, $3, COALESCE(MAX(version), 0) + 1, $4, $5, $6, $7, $8 FROM provider_apps WHERE organization_id = $2 AND provider = $3",
        )
        .bind(new.id)
        .bind(self.org.as_str())
        .bind(new.provider)
        .bind(new.client_id)
        .bind(new.client_secret_sealed)
        .bind(new.scopes.map(Scopes::to_space_separated))
        .bind(&template_values)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from_write)?;
        tx.commit().await?;
        self.version(new.id).await?.ok_or_else(|| StoreError::Corrupt(format!("provider app {} vanished", new.id)))
    }

    /// The version new connections at `provider` use, if the organization has one.
    pub async fn current(self, provider: &str) -> StoreResult<Option<ProviderApp>> {
        sqlx::query_as::<_, RawProviderApp>(&format!(
            "SELECT {COLUMNS} FROM provider_apps WHERE organization_id = $1 AND provider = $2 AND retired_at IS NULL"
        ))
        .bind(self.org.as_str())
        .bind(provider)
        .fetch_optional_in(self.store.read())
        .await?
        .map(ProviderApp::try_from)
        .transpose()
    }

    /// One version, retired or not (what a grant or an authorization names).
    pub async fn version(self, id: &str) -> StoreResult<Option<ProviderApp>> {
        sqlx::query_as::<_, RawProviderApp>(&format!(
            "SELECT {COLUMNS} FROM provider_apps WHERE organization_id = $1 AND id = $2"
        ))
        .bind(self.org.as_str())
        .bind(id)
        .fetch_optional_in(self.store.read())
        .await?
        .map(ProviderApp::try_from)
        .transpose()
    }

    /// The versions in use, by provider.
    pub async fn in_use(self) -> StoreResult<Vec<ProviderApp>> {
        sqlx::query_as::<_, RawProviderApp>(&format!(
            "SELECT {COLUMNS} FROM provider_apps WHERE organization_id = $1 AND retired_at IS NULL ORDER BY provider"
        ))
        .bind(self.org.as_str())
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(ProviderApp::try_from)
        .collect()
    }

    /// Every version at `provider`, newest first.
    pub async fn history(self, provider: &str) -> StoreResult<Vec<ProviderApp>> {
        sqlx::query_as::<_, RawProviderApp>(&format!(
            "SELECT {COLUMNS} FROM provider_apps WHERE organization_id = $1 AND provider = $2 ORDER BY version DESC"
        ))
        .bind(self.org.as_str())
        .bind(provider)
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(ProviderApp::try_from)
        .collect()
    }

    /// Retires the version in use at `provider`: new connections go back to the operator's app
    /// (where the operator allows it). Grants made with it keep it. False if there was none.
    pub async fn retire(self, provider: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE provider_apps SET retired_at = $1 WHERE organization_id = $2 AND provider = $3 AND retired_at IS NULL",
        )
        .bind(now)
        .bind(self.org.as_str())
        .bind(provider)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// How many of the organization's grants each version issued, for `admin orgs apps`.
    pub async fn grants_of(self, id: &str) -> StoreResult<i64> {
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM grants WHERE app_id = $1 AND organization_id = $2")
            .bind(id)
            .bind(self.org.as_str())
            .fetch_one_in(self.store.read())
            .await?;
        Ok(n)
    }
}
