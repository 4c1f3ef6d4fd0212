//! A user's grants, each with one client's consent, kept between tool calls.
//!
//! `list_connections` reads them all, `provider_request` the account pick and the grant with its
//! consent: the same rows on every call, which change only when the user connects, disconnects,
//! allows or withdraws, or a token is refreshed. One read per (user, client) is kept under the
//! user's generation ([`crate::store::machinery::generations`]) and used while it has not moved: a
//! write of this process about the user (or about no one in particular) moves it at once, a write
//! of another process within the watcher's interval (triggers on `grants` and `client_consents`,
//! migrations 0012 and 0015, move the counter it reads). An answer read while the generation moved
//! is not kept.

use std::sync::Arc;

use crate::store::grants::row::Grants;
use crate::store::grants::with_consent::GrantWithConsent;
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::generation_cache::GenerationCache;
use crate::store::machinery::kept::Kept;

/// At most this many (user, client) reads are kept; a full cache starts over.
pub(in crate::store) const CAPACITY: usize = 50_000;

#[derive(Debug)]
pub(in crate::store) struct GrantCache {
    /// By (user, client key).
    entries: GenerationCache<(String, String), Arc<Vec<GrantWithConsent>>>,
}

impl Default for GrantCache {
    fn default() -> Self {
        Self { entries: GenerationCache::new(CAPACITY) }
    }
}

impl Kept for GrantCache {}

impl GrantCache {
    /// What was read for (`user_id`, `client_key`) under the user's current `generation`, if
    /// anything. An entry of an older generation is dropped.
    pub fn get(&self, generation: u64, user_id: &str, client_key: &str) -> Option<Arc<Vec<GrantWithConsent>>> {
        // A borrowed-key lookup would need a custom key type; two short strings are cheap.
        self.entries.get(&(user_id.to_owned(), client_key.to_owned()), |_| Some(generation))
    }

    /// Keeps `rows`, read after the step `before` was taken, under the user's `generation` read
    /// after them — unless it is later than `before` (a write about the user landed meanwhile:
    /// the rows may predate it).
    pub fn insert(
        &self,
        before: u64,
        generation: Option<u64>,
        user_id: &str,
        client_key: &str,
        rows: Arc<Vec<GrantWithConsent>>,
    ) {
        self.entries.insert(before, generation, (user_id.to_owned(), client_key.to_owned()), rows);
    }
}

impl Grants<'_> {
    /// [`Grants::for_user_with_consents`] through the cache: no database call while nothing was
    /// written since the last read ([`crate::store::machinery::generations`]).
    pub async fn for_user_seen_by(self, user_id: &str, client_key: &str) -> StoreResult<Arc<Vec<GrantWithConsent>>> {
        let cache = self.store.kept::<GrantCache>();
        if let Some(generation) = self.store.cache_generation(user_id)
            && let Some(rows) = cache.get(generation, user_id, client_key)
        {
            return Ok(rows);
        }
        let before = self.store.cache_tick();
        let rows = Arc::new(self.for_user_with_consents(user_id, client_key).await?);
        if let Some(before) = before {
            cache.insert(before, self.store.cache_generation(user_id), user_id, client_key, rows.clone());
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_lives_only_in_its_generation_and_a_late_answer_is_not_kept() {
        let cache = GrantCache::default();
        assert!(cache.get(1, "u", "c").is_none());
        cache.insert(5, Some(1), "u", "c", Arc::new(Vec::new()));
        assert!(cache.get(1, "u", "c").is_some());
        assert!(cache.get(1, "u", "other client").is_none());
        assert!(cache.get(2, "u", "c").is_none(), "a moved generation drops it");
        assert!(cache.get(1, "u", "c").is_none(), "and it is gone");
        // Read after step 5, but a write about the user took step 6 before it was stored.
        cache.insert(5, Some(6), "u", "c", Arc::new(Vec::new()));
        assert!(cache.get(6, "u", "c").is_none());
        cache.insert(7, Some(6), "u", "c", Arc::new(Vec::new()));
        assert!(cache.get(6, "u", "c").is_some());
        cache.insert(7, None, "v", "c", Arc::new(Vec::new()));
        assert!(cache.get(0, "v", "c").is_none(), "nothing kept while untrusted");
    }
}
