//! The in-process half of "one refresh per grant at a time" (the database lease is the other):
//! one async mutex per grant id. Its own file so the state that holds it imports nothing else
//! of the core.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One async mutex per grant id.
#[derive(Debug, Default)]
pub struct RefreshLocks {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl RefreshLocks {
    pub(crate) fn lock_for(&self, grant_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.locks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        map.entry(grant_id.to_owned()).or_default().clone()
    }
}
