//! The providers users can connect, keyed by id: the configured ones (fixed at start) and the
//! ones derived from `mcp-oauth` servers behind the broker ([`super::mcp_oauth`]), replaced
//! whenever the registered servers change. Lookups hand out an `Arc`, so a caller keeps the
//! provider it found even if the server is removed meanwhile.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use super::provider::ProviderConfig;
use crate::domain::{ProviderId, Scopes};

type ById = BTreeMap<ProviderId, Arc<ProviderConfig>>;

#[derive(Debug, Default)]
pub struct Providers {
    by_id: ById,
    /// What each provider needs to work with the broker, asked for on every connect
    /// ([`super::catalogue::required_scopes`]).
    required: BTreeMap<ProviderId, Scopes>,
    /// Derived from the `mcp-oauth` servers behind the broker; a configured provider of the
    /// same id wins (the admin CLI refuses such a name, but the config can change later).
    servers: RwLock<Arc<ById>>,
}

impl Providers {
    /// The configured providers (`Config::providers`), each with what its catalogue entry marks
    /// as required.
    pub fn new(by_id: BTreeMap<ProviderId, ProviderConfig>) -> Self {
        let required = by_id
            .values()
            .filter_map(|p| {
                p.catalogue.as_deref().map(|entry| (p.id.clone(), super::catalogue::required_scopes(entry)))
            })
            .filter(|(_, scopes)| !scopes.is_empty())
            .collect();
        let by_id = by_id.into_iter().map(|(id, p)| (id, Arc::new(p))).collect();
        Self { by_id, required, servers: RwLock::default() }
    }

    /// With one more provider (the built-in demo one, when enabled), replacing one of its id.
    pub fn with(self, provider: ProviderConfig) -> Self {
        self.with_required(provider, Scopes::default())
    }

    /// [`Providers::with`], for a provider that needs `required` to work.
    pub fn with_required(mut self, provider: ProviderConfig, required: Scopes) -> Self {
        self.required.insert(provider.id.clone(), required);
        self.by_id.insert(provider.id.clone(), Arc::new(provider));
        self
    }

    /// Replaces the providers derived from servers behind the broker.
    pub fn set_server_providers(&self, providers: Vec<ProviderConfig>) {
        let fresh: ById = providers
            .into_iter()
            .filter(|p| !self.by_id.contains_key(&p.id))
            .map(|p| (p.id.clone(), Arc::new(p)))
            .collect();
        *self.servers.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(fresh);
    }

    fn servers(&self) -> Arc<ById> {
        self.servers.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The scopes every connect with `provider` asks for besides those it names.
    pub fn required_scopes(&self, provider: &ProviderId) -> Scopes {
        self.required.get(provider).cloned().unwrap_or_default()
    }

    pub fn get(&self, id: &ProviderId) -> Option<Arc<ProviderConfig>> {
        self.by_id.get(id).cloned().or_else(|| self.servers().get(id).cloned())
    }

    /// Looks a provider up by the id a client typed.
    pub fn find(&self, id: &str) -> Option<Arc<ProviderConfig>> {
        ProviderId::parse(id).ok().and_then(|id| self.get(&id))
    }

    /// Every provider, configured ones first, each group by id.
    pub fn iter(&self) -> impl Iterator<Item = Arc<ProviderConfig>> + use<> {
        let mut all: Vec<_> = self.by_id.values().cloned().collect();
        all.extend(self.servers().values().cloned());
        all.into_iter()
    }

    pub fn ids(&self) -> Vec<String> {
        self.iter().map(|p| p.id.to_string()).collect()
    }
}
