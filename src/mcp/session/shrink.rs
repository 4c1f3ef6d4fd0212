//! Maps and queues keyed by session give their memory back as sessions close.
//!
//! A `HashMap` or `VecDeque` keeps its capacity when entries are removed: after 10,000 sessions
//! had closed, the maps that had held them (the session table, the event log's streams and
//! indexes) still held tables sized for 10,000, several MB between them, which the process
//! kept. Called from one place, the table's `give_back` ([`super::table`]), after a session
//! leaves the table or the event log drops streams. Each is shrunk once it is mostly empty: at most a quarter of
//! its capacity in use, down to twice what it holds, so a map that shrinks has room to grow
//! again before it must reallocate, and the work of rehashing stays proportional to the
//! removals that made it worth it.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash};

/// Below this capacity a map is left as it is: too small to matter.
const SMALL: usize = 64;

fn sparse(len: usize, capacity: usize) -> bool {
    capacity > SMALL && len.saturating_mul(4) < capacity
}

/// Shrinks `map` if at most a quarter of its capacity is in use.
pub fn map<K: Eq + Hash, V, S: BuildHasher>(map: &mut HashMap<K, V, S>) {
    if sparse(map.len(), map.capacity()) {
        map.shrink_to(map.len() * 2);
    }
}

/// Shrinks `deque` if at most a quarter of its capacity is in use.
pub fn deque<T>(deque: &mut VecDeque<T>) {
    if sparse(deque.len(), deque.capacity()) {
        deque.shrink_to(deque.len() * 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mostly_empty_map_shrinks_and_keeps_room_and_a_small_one_is_left_alone() {
        let mut big: HashMap<u32, u32> = (0..10_000).map(|i| (i, i)).collect();
        let full = big.capacity();
        big.retain(|k, _| *k < 4_000);
        let before = big.capacity();
        map(&mut big);
        assert_eq!(big.capacity(), before, "over a quarter in use: not worth a rehash");
        big.retain(|k, _| *k < 100);
        map(&mut big);
        assert!(big.capacity() >= 200 && big.capacity() < full / 10, "shrunk: {}", big.capacity());
        assert_eq!(big.len(), 100, "nothing lost");
        assert!((0..100).all(|k| big[&k] == k));

        let mut small: HashMap<u32, u32> = (0..40).map(|i| (i, i)).collect();
        let capacity = small.capacity();
        small.clear();
        map(&mut small);
        assert_eq!(small.capacity(), capacity);
    }

    #[test]
    fn a_mostly_empty_queue_shrinks_and_keeps_its_order() {
        let mut queue: VecDeque<u32> = (0..10_000).collect();
        queue.drain(..9_950);
        deque(&mut queue);
        assert!(queue.capacity() >= 100 && queue.capacity() < 1_000, "shrunk: {}", queue.capacity());
        assert_eq!(queue.iter().copied().collect::<Vec<_>>(), (9_950..10_000).collect::<Vec<_>>());
    }
}
