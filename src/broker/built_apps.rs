//! Organizations' app versions built into provider settings, kept by this process: a version
//! never changes once stored ([`crate::store::organizations::apps`]), so what is built from it
//! stays right for as long as the process runs ([`super::provider_apps`] fills it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::config::ProviderConfig;
use crate::domain::OrganizationId;

/// At most this many built versions are kept; a full cache starts over.
const KEPT: usize = 10_000;

/// Provider settings built from app versions, by (organization, version id): a version is
/// found only in the organization it belongs to, here as in the store.
#[derive(Debug, Default)]
pub struct BuiltApps(Mutex<HashMap<(OrganizationId, String), Arc<ProviderConfig>>>);

impl BuiltApps {
    pub(super) fn get(&self, org: &OrganizationId, id: &str) -> Option<Arc<ProviderConfig>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(&(org.clone(), id.to_owned())).cloned()
    }

    pub(super) fn keep(&self, org: &OrganizationId, id: &str, config: Arc<ProviderConfig>) {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() >= KEPT {
            kept.clear();
        }
        kept.insert((org.clone(), id.to_owned()), config);
    }
}
