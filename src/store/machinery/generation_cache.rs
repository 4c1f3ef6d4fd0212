//! What every cache of database reads does the same way: an answer is kept under
//! the generation ([`super::generations`]) it was read in, used only while that generation has not
//! moved, and kept at all only if the generation did not move while it was being read.
//!
//! The caches differ in what they key by and whose generation an entry follows (a user's for
//! bearer tokens and grants, everyone's for the demo provider's tokens), so [`GenerationCache::get`]
//! asks the caller for the generation *now* of the entry it found.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

pub struct GenerationCache<K, V> {
    entries: Mutex<HashMap<K, Kept<V>>>,
    /// At most this many entries; a full cache starts over (each answer is still read once).
    capacity: usize,
}

struct Kept<V> {
    generation: u64,
    value: V,
}

impl<K, V> std::fmt::Debug for GenerationCache<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenerationCache").field("entries", &self.len()).field("capacity", &self.capacity).finish()
    }
}

impl<K, V> GenerationCache<K, V> {
    pub fn new(capacity: usize) -> Self {
        Self { entries: Mutex::default(), capacity }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<K, Kept<V>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn len(&self) -> usize {
        self.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: Eq + Hash, V: Clone> GenerationCache<K, V> {
    /// The value kept under `key`, if `current` (the generation now of what the value belongs
    /// to) is still the one it was kept under. An entry whose generation moved is dropped;
    /// when `current` is `None` (nothing may be trusted now) nothing is answered and the entry
    /// stays for when trust returns.
    pub fn get<Q>(&self, key: &Q, current: impl FnOnce(&V) -> Option<u64>) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.get_if(key, current, |_| true)
    }

    /// [`GenerationCache::get`] for an entry that can also stop being usable on its own
    /// (`usable` false, e.g. an expired token): such an entry is dropped too.
    pub fn get_if<Q>(
        &self,
        key: &Q,
        current: impl FnOnce(&V) -> Option<u64>,
        usable: impl FnOnce(&V) -> bool,
    ) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        let mut entries = self.entries();
        let kept = entries.get(key)?;
        match current(&kept.value) {
            None => None,
            Some(generation) if generation == kept.generation && usable(&kept.value) => Some(kept.value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
        }
    }

    /// Keeps `value`, read after the step `before` was taken, under `generation` — the
    /// generation of what it belongs to, read after the value was — unless that is later than
    /// `before` (it moved meanwhile: the value may predate the change) or `None` (nothing may be
    /// kept now).
    pub fn insert(&self, before: u64, generation: Option<u64>, key: K, value: V) {
        let Some(generation) = generation.filter(|g| *g <= before) else { return };
        let mut entries = self.entries();
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.clear();
        }
        entries.insert(key, Kept { generation, value });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_answered_only_while_its_generation_stands_and_dropped_once_it_moved() {
        let cache = GenerationCache::<String, u32>::new(10);
        cache.insert(3, Some(3), "a".into(), 1);
        assert_eq!(cache.get("a", |_| Some(3)), Some(1));
        assert_eq!(cache.get("b", |_| Some(3)), None);
        assert_eq!(cache.get("a", |_| None), None, "nothing is answered while untrusted");
        assert_eq!(cache.get("a", |_| Some(3)), Some(1), "but it is kept for when trust returns");
        assert_eq!(cache.get("a", |_| Some(4)), None, "the generation moved");
        assert!(cache.is_empty(), "and the entry is gone");
    }

    #[test]
    fn a_value_read_while_its_generation_moved_or_untrusted_is_not_kept() {
        let cache = GenerationCache::<&str, u32>::new(10);
        // Read after step 5, but a write took step 6 before it was stored.
        cache.insert(5, Some(6), "a", 1);
        assert!(cache.is_empty());
        cache.insert(5, None, "a", 1);
        assert!(cache.is_empty());
        cache.insert(7, Some(6), "a", 1);
        assert_eq!(cache.get("a", |_| Some(6)), Some(1));
    }

    #[test]
    fn the_generation_asked_for_is_the_one_of_the_value_found() {
        let cache = GenerationCache::<&str, &str>::new(10);
        cache.insert(1, Some(1), "t1", "alice");
        cache.insert(1, Some(1), "t2", "bob");
        let alice_moved = |owner: &&str| Some(if *owner == "alice" { 2 } else { 1 });
        assert_eq!(cache.get("t1", alice_moved), None);
        assert_eq!(cache.get("t2", alice_moved), Some("bob"));
    }

    #[test]
    fn an_unusable_entry_is_dropped() {
        let cache = GenerationCache::<&str, u32>::new(10);
        cache.insert(1, Some(1), "a", 10);
        assert_eq!(cache.get_if("a", |_| Some(1), |v| *v > 10), None);
        assert!(cache.is_empty());
    }

    #[test]
    fn a_full_cache_starts_over_but_replacing_an_entry_does_not_empty_it() {
        let cache = GenerationCache::<u32, u32>::new(3);
        for i in 0..3 {
            cache.insert(1, Some(1), i, i);
        }
        cache.insert(1, Some(1), 2, 20);
        assert_eq!(cache.len(), 3);
        cache.insert(1, Some(1), 3, 3);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get(&3, |_| Some(1)), Some(3));
    }
}
