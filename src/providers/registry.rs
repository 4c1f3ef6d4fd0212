//! The providers users can connect, keyed by id.

use std::collections::BTreeMap;

use super::provider::ProviderConfig;
use crate::domain::{ProviderId, Scopes};

#[derive(Debug, Default)]
pub struct Providers {
    by_id: BTreeMap<ProviderId, ProviderConfig>,
    /// What each provider needs to work with the broker, asked for on every connect
    /// ([`super::catalogue::required_scopes`]).
    required: BTreeMap<ProviderId, Scopes>,
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
        Self { by_id, required }
    }

    /// With one more provider (the built-in demo one, when enabled), replacing one of its id.
    pub fn with(self, provider: ProviderConfig) -> Self {
        self.with_required(provider, Scopes::default())
    }

    /// [`Providers::with`], for a provider that needs `required` to work.
    pub fn with_required(mut self, provider: ProviderConfig, required: Scopes) -> Self {
        self.required.insert(provider.id.clone(), required);
        self.by_id.insert(provider.id.clone(), provider);
        self
    }

    /// The scopes every connect with `provider` asks for besides those it names.
    pub fn required_scopes(&self, provider: &ProviderId) -> Scopes {
        self.required.get(provider).cloned().unwrap_or_default()
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
