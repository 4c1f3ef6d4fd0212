//! Which OAuth app a connection uses: the organization's own at that provider (bring your own
//! app), or the operator's.
//!
//! ```text
//! connect in org O at provider P ─▶ O's app in use at P? ──yes──▶ that version (recorded on the
//!                                    │                              authorization, then the grant)
//!                                    no ─▶ O is the default organization, or the operator shares
//!                                          P (`shared_with_organizations`)? ─▶ the operator's app
//!                                          otherwise ─▶ refused: O sets its own app first
//! refresh / revoke / API call of a grant ─▶ the version that grant names (or the operator's)
//! ```
//!
//! A version never changes once stored ([`crate::store::organizations::apps`]), so the provider
//! settings built from one are kept in memory by its id for as long as this process runs: a
//! grant's refresh or API call costs no read for its app after the first.

use std::collections::BTreeMap;
use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};

use super::core::Core;
use crate::config::ProviderConfig;
use crate::crypto::SealContext;
use crate::domain::{OrganizationId, Scopes};
use crate::providers::catalogue::{AppSettings, ProviderConfigError, with_app};
use crate::store::StoreError;
use crate::store::organizations::{NewProviderApp, ProviderApp};

/// Where an app version's client secret is sealed: bound to the version and its organization.
pub fn secret_context<'a>(app_id: &'a str, organization_id: &'a str) -> SealContext<'a> {
    SealContext { table: "provider_apps", column: "client_secret_sealed", row_id: app_id, owner: organization_id }
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The organization has no app at this provider and the operator does not share theirs.
    #[error("the organization has no app of its own at {provider_name}, and the operator's is not shared")]
    NoApp { provider_name: String },
    /// The app a grant or an authorization names is gone (its key was forgotten).
    #[error("the organization's app version {0} is gone")]
    Gone(String),
    /// The app's settings do not make a provider (a field is wrong).
    #[error(transparent)]
    Invalid(#[from] ProviderConfigError),
    /// The app's sealed secret could not be opened (tampered, or under a key not loaded).
    #[error("the organization's app secret could not be opened")]
    SecretUnreadable,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The provider settings a connection uses, and the app version they came from (`None`: the
/// operator's app).
#[derive(Debug, Clone)]
pub struct Chosen {
    pub config: Arc<ProviderConfig>,
    pub app_id: Option<String>,
}

/// The app a new connection at `provider` made in `org` uses.
pub async fn for_connect(
    core: &Core,
    org: &OrganizationId,
    provider: &Arc<ProviderConfig>,
) -> Result<Chosen, AppError> {
    if let Some(app) = core.store.in_org(org).provider_apps().current(provider.id.as_str()).await? {
        let config = built(core, provider, &app)?;
        return Ok(Chosen { config, app_id: Some(app.id) });
    }
    if org.is_default() || provider.shared_with_organizations {
        return Ok(Chosen { config: provider.clone(), app_id: None });
    }
    Err(AppError::NoApp { provider_name: provider.display_name.clone() })
}

/// The provider settings of the app version `app_id` of `org`, as a grant or an authorization
/// names it, over the operator's `provider`; `None` when it names none (the operator's app):
/// callers go on with `app.as_deref().unwrap_or(provider)`.
pub async fn of_version(
    core: &Core,
    org: &OrganizationId,
    app_id: Option<&str>,
    provider: &ProviderConfig,
) -> Result<Option<Arc<ProviderConfig>>, AppError> {
    let Some(id) = app_id else { return Ok(None) };
    if let Some(config) = core.apps.get(org, id) {
        return Ok(Some(config));
    }
    let app = core.store.in_org(org).provider_apps().version(id).await?.ok_or_else(|| AppError::Gone(id.to_owned()))?;
    built(core, provider, &app).map(Some)
}

/// [`of_version`] for the app `grant` was issued by: what it refreshes, revokes and calls the
/// API with.
pub async fn for_grant(
    core: &Core,
    grant: &crate::store::grants::GrantRow,
    provider: &ProviderConfig,
) -> Result<Option<Arc<ProviderConfig>>, AppError> {
    of_version(core, &grant.organization, grant.app_id.as_deref(), provider).await
}

fn built(core: &Core, provider: &ProviderConfig, app: &ProviderApp) -> Result<Arc<ProviderConfig>, AppError> {
    if let Some(config) = core.apps.get(&app.organization, &app.id) {
        return Ok(config);
    }
    let secret = match &app.client_secret_sealed {
        Some(sealed) => {
            let bytes = core
                .sealer
                .open(sealed, secret_context(&app.id, app.organization.as_str()))
                .map_err(|_| AppError::SecretUnreadable)?;
            Some(SecretString::from(String::from_utf8(bytes).map_err(|_| AppError::SecretUnreadable)?))
        }
        None => None,
    };
    let settings = AppSettings {
        client_id: &app.client_id,
        client_secret: secret.as_ref(),
        scopes: app.scopes.as_ref(),
        template_values: &app.template_values,
    };
    let config = Arc::new(with_app(provider, &settings)?);
    core.apps.keep(&app.organization, &app.id, config.clone());
    Ok(config)
}

/// The redirect URI an organization registers with its app at the provider: the broker's
/// callback for that provider, the same one the operator's app uses.
pub fn redirect_uri(core: &Core, app: &ProviderApp) -> Option<url::Url> {
    crate::domain::ProviderId::parse(&app.provider).ok().map(|p| core.config.provider_redirect_uri(&p))
}

/// What an organization's admin sets for its app at a provider.
#[derive(Debug, Clone, Copy)]
pub struct AppChange<'a> {
    pub client_id: &'a str,
    pub client_secret: Option<&'a SecretString>,
    pub scopes: Option<&'a Scopes>,
    pub template_values: &'a BTreeMap<String, String>,
}

/// Stores a new version of `org`'s app at `provider`, in use from now on for new connections
/// (grants made before keep theirs). Checked first exactly as it will be used: a field that does
/// not make a working provider is refused before anything is stored.
pub async fn set(
    core: &Core,
    org: &OrganizationId,
    provider: &ProviderConfig,
    change: &AppChange<'_>,
) -> Result<ProviderApp, AppError> {
    let settings = AppSettings {
        client_id: change.client_id,
        client_secret: change.client_secret,
        scopes: change.scopes,
        template_values: change.template_values,
    };
    with_app(provider, &settings)?;
    if let Some(scopes) = change.scopes {
        crate::providers::scopes::check(provider, scopes).map_err(|e| {
            AppError::Invalid(ProviderConfigError {
                provider: provider.id.to_string(),
                field: "scopes".into(),
                message: e.to_string(),
            })
        })?;
    }
    let id = format!("app_{}", uuid::Uuid::new_v4().simple());
    let sealed = change
        .client_secret
        .map(|secret| core.sealer.seal(secret.expose_secret().as_bytes(), secret_context(&id, org.as_str())));
    let new = NewProviderApp {
        id: &id,
        provider: provider.id.as_str(),
        client_id: change.client_id,
        client_secret_sealed: sealed.as_deref(),
        scopes: change.scopes,
        template_values: change.template_values,
    };
    Ok(core.store.in_org(org).provider_apps().set(&new, core.now()).await?)
}
