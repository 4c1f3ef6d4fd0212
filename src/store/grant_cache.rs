//! A user's grants, each with one client's consent, kept between tool calls (issue 11).
//!
//! `list_connections` reads them all, `provider_request` the account pick and the grant with
//! its consent: the same rows on every call, which change only when the user connects,
//! disconnects, allows or withdraws, or a token is refreshed. One read per (user, client) is
//! kept under the user's generation ([`super::freshness`]) and used while it has not moved: a
//! write of this process about the user (or about no one in particular) moves it at once, a
//! write of another process within the watcher's interval (triggers on `grants` and
//! `client_consents`, migrations 0012 and 0015, move the counter it reads). An answer read while
//! the generation moved is not kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::generation_cache::GenerationCache;
use super::grant_consents::GrantWithConsent;

/// At most this many (user, client) reads are kept; a full cache starts over.
pub const CAPACITY: usize = 50_000;

#[derive(Debug)]
pub struct GrantCache {
    /// By (user, client key).
    entries: GenerationCache<(String, String), Arc<Vec<GrantWithConsent>>>,
    /// Grant id → its user, as reads saw it. A grant never changes hands (its id is derived
    /// from its user, [`super::Store::grant_id_for`], and no statement moves `user_id`), so
    /// this is never out of date, only incomplete.
    owners: Mutex<HashMap<String, String>>,
}

impl Default for GrantCache {
    fn default() -> Self {
        Self { entries: GenerationCache::new(CAPACITY), owners: Mutex::default() }
    }
}

impl GrantCache {
    /// What was read for (`user_id`, `client_key`) under the user's current `generation`, if
    /// anything. An entry of an older generation is dropped.
    pub fn get(&self, generation: u64, user_id: &str, client_key: &str) -> Option<Arc<Vec<GrantWithConsent>>> {
        // A borrowed-key lookup would need a custom key type; two short strings are cheap.
        self.entries.get(&(user_id.to_owned(), client_key.to_owned()), |_| Some(generation))
    }

    /// The user grant `grant_id` belongs to, if a read of their grants passed through here.
    pub fn owner_of(&self, grant_id: &str) -> Option<String> {
        self.owners.lock().unwrap_or_else(|p| p.into_inner()).get(grant_id).cloned()
    }

    /// Records that grant `grant_id` is `user_id`'s (read or written so).
    pub fn note_owner(&self, grant_id: &str, user_id: &str) {
        self.note_owners(std::iter::once((grant_id, user_id)));
    }

    fn note_owners<'r>(&self, grants: impl Iterator<Item = (&'r str, &'r str)>) {
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        for (grant_id, user_id) in grants {
            if owners.contains_key(grant_id) {
                continue;
            }
            if owners.len() >= CAPACITY {
                owners.clear();
            }
            owners.insert(grant_id.to_owned(), user_id.to_owned());
        }
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
        self.note_owners(rows.iter().map(|r| (r.grant.id.as_str(), r.grant.user_id.as_str())));
        self.entries.insert(before, generation, (user_id.to_owned(), client_key.to_owned()), rows);
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

    #[test]
    fn a_grants_owner_is_known_once_seen_and_never_replaced() {
        let cache = GrantCache::default();
        assert_eq!(cache.owner_of("g1"), None);
        cache.note_owner("g1", "u1");
        cache.note_owner("g1", "u2");
        assert_eq!(cache.owner_of("g1").as_deref(), Some("u1"));
    }
}
