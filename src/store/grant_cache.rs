//! A user's grants, each with one client's consent, kept between tool calls (issue 11).
//!
//! `list_connections` reads them all, `provider_request` the account pick and the grant with
//! its consent: the same rows on every call, which change only when the user connects,
//! disconnects, allows or withdraws, or a token is refreshed. One read per (user, client) is
//! kept under the store's generation ([`super::freshness`]) and used while the generation has
//! not moved: every write of this process moves it at once, a write of another process within
//! the watcher's interval (triggers on `grants` and `client_consents`, migrations 0012 and
//! 0015, move the counter it reads). An answer read while the generation moved is not kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::grant_consents::GrantWithConsent;

/// At most this many (user, client) reads are kept; a full cache starts over.
pub const CAPACITY: usize = 50_000;

type Key = (String, String);

#[derive(Debug, Default)]
pub struct GrantCache {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The generation every entry was read under; entries of another generation are gone.
    generation: u64,
    entries: HashMap<Key, Arc<Vec<GrantWithConsent>>>,
}

impl GrantCache {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What was read for (`user_id`, `client_key`) under `generation`, if anything.
    pub fn get(&self, generation: u64, user_id: &str, client_key: &str) -> Option<Arc<Vec<GrantWithConsent>>> {
        let mut inner = self.inner();
        // Generations only grow: a newer one empties the cache; a request that saw an older
        // one (it started before a write) finds nothing and leaves the cache alone.
        if generation > inner.generation {
            inner.entries.clear();
            inner.generation = generation;
            return None;
        }
        if generation < inner.generation {
            return None;
        }
        // A borrowed-key lookup would need a custom key type; two short strings are cheap.
        inner.entries.get(&(user_id.to_owned(), client_key.to_owned())).cloned()
    }

    /// Keeps `rows`, read after the generation was seen as `generation`, unless it has moved
    /// since (then they may predate a write).
    pub fn insert(
        &self,
        generation: u64,
        current: Option<u64>,
        user_id: &str,
        client_key: &str,
        rows: Arc<Vec<GrantWithConsent>>,
    ) {
        if current != Some(generation) {
            return;
        }
        let mut inner = self.inner();
        if inner.generation != generation {
            return;
        }
        if inner.entries.len() >= CAPACITY {
            inner.entries.clear();
        }
        inner.entries.insert((user_id.to_owned(), client_key.to_owned()), rows);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_lives_only_in_its_generation_and_a_late_answer_is_not_kept() {
        let cache = GrantCache::default();
        assert!(cache.get(1, "u", "c").is_none());
        cache.insert(1, Some(1), "u", "c", Arc::new(Vec::new()));
        assert!(cache.get(1, "u", "c").is_some());
        assert!(cache.get(1, "u", "other client").is_none());
        assert!(cache.get(2, "u", "c").is_none(), "a moved generation drops it");
        // Read under 2, but a write moved the generation to 3 before it was stored.
        cache.insert(2, Some(3), "u", "c", Arc::new(Vec::new()));
        assert!(cache.get(2, "u", "c").is_none());
        // Read under 1, stored after the cache saw 2; a request that still saw 1 neither
        // finds it nor takes the cache back to 1.
        cache.insert(1, Some(1), "u", "c", Arc::new(Vec::new()));
        assert!(cache.get(1, "u", "c").is_none());
        cache.insert(2, Some(2), "u", "c", Arc::new(Vec::new()));
        assert!(cache.get(2, "u", "c").is_some());
    }
}
