//! The providers users can connect, keyed by id.

use std::collections::BTreeMap;

use super::provider::ProviderConfig;
use crate::domain::ProviderId;

#[derive(Debug, Default)]
pub struct Providers {
    by_id: BTreeMap<ProviderId, ProviderConfig>,
}

impl Providers {
    /// The configured providers (`Config::providers`).
    pub fn new(by_id: BTreeMap<ProviderId, ProviderConfig>) -> Self {
        Self { by_id }
    }

    /// With one more provider (the built-in demo one, when enabled), replacing one of its id.
    pub fn with(mut self, provider: ProviderConfig) -> Self {
        self.by_id.insert(provider.id.clone(), provider);
        self
    }

    pub fn get(&self, id: &ProviderId) -> Option<&ProviderConfig> {
        self.by_id.get(id)
    }

    /// Looks a provider up by the id a client typed.
    pub fn find(&self, id: &str) -> Option<&ProviderConfig> {
        ProviderId::parse(id).ok().and_then(|id| self.by_id.get(&id).map(|p| p as _))
    }

    pub fn iter(&self) -> impl Iterator<Item = &ProviderConfig> {
        self.by_id.values()
    }

    pub fn ids(&self) -> Vec<String> {
        self.by_id.keys().map(ToString::to_string).collect()
    }
}
