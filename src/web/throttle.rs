//! Failed sign-in throttle, per (username, client IP).
//!
//! After [`MAX_FAILURES`] wrong passwords for one username from one IP within [`WINDOW_SECONDS`],
//! that pair is refused (HTTP 429, without checking the password) for the next
//! [`WINDOW_SECONDS`]. A successful sign-in clears the pair. Keying on the pair, not the
//! username alone, stops guessing without letting anyone lock a victim out from elsewhere.
//!
//! Limits of this first cut: it lives in memory, so each instance counts on its own and a
//! restart forgets; the IP is the TCP peer, so behind a reverse proxy every user shares the
//! proxy's address (the username still separates them). Times come from the app clock.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::clock::Timestamp;

/// Wrong passwords allowed per window for one (username, IP).
pub const MAX_FAILURES: usize = 5;
/// Wrong passwords allowed per window from one IP across all usernames, so spraying many
/// usernames from one address is throttled too.
pub const MAX_FAILURES_PER_IP: usize = 30;
/// The username slot of the per-IP bucket (cannot collide: usernames have no NUL).
const ANY_USER: &str = "\0any";
/// Length of the counting window and of the lockout.
pub const WINDOW_SECONDS: i64 = 5 * 60;
/// Above this many tracked pairs, stale ones are swept on the next failure.
const SWEEP_ABOVE: usize = 1024;

#[derive(Debug, Default)]
struct Entry {
    /// Failures inside the current window, oldest first.
    failures: Vec<Timestamp>,
    locked_until: Option<Timestamp>,
}

impl Entry {
    fn is_stale(&self, now: Timestamp) -> bool {
        self.locked_until.is_none_or(|until| until <= now) && self.failures.iter().all(|&t| t <= now - WINDOW_SECONDS)
    }
}

#[derive(Debug, Default)]
pub struct LoginThrottle {
    entries: Mutex<HashMap<(String, String), Entry>>,
}

fn key(username: &str, ip: &str) -> (String, String) {
    (username.trim().to_lowercase(), ip.to_owned())
}

impl LoginThrottle {
    pub fn new() -> Self {
        Self::default()
    }

    /// Seconds until this pair (or this IP as a whole) may try again, if locked out.
    pub fn retry_after(&self, username: &str, ip: &str, now: Timestamp) -> Option<i64> {
        let entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        [key(username, ip), key(ANY_USER, ip)]
            .iter()
            .filter_map(|k| entries.get(k).and_then(|e| e.locked_until))
            .filter(|&until| until > now)
            .max()
            .map(|until| until - now)
    }

    /// Counts a wrong password for the pair and for the IP; reaching a limit starts a lockout.
    pub fn record_failure(&self, username: &str, ip: &str, now: Timestamp) {
        let mut entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if entries.len() > SWEEP_ABOVE {
            entries.retain(|_, entry| !entry.is_stale(now));
        }
        for (k, limit) in [(key(username, ip), MAX_FAILURES), (key(ANY_USER, ip), MAX_FAILURES_PER_IP)] {
            let entry = entries.entry(k).or_default();
            entry.failures.retain(|&t| t > now - WINDOW_SECONDS);
            entry.failures.push(now);
            if entry.failures.len() >= limit {
                entry.failures.clear();
                entry.locked_until = Some(now + WINDOW_SECONDS);
            }
        }
    }

    /// A successful sign-in forgets the pair's failures (not the IP's: one valid account must
    /// not reset a spray from the same address).
    pub fn clear(&self, username: &str, ip: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        entries.remove(&key(username, ip));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_failures_in_the_window_lock_the_pair_for_the_window() {
        let t = LoginThrottle::new();
        for i in 0..4 {
            t.record_failure("alice", "10.0.0.1", 1_000 + i * 10);
            assert_eq!(t.retry_after("alice", "10.0.0.1", 1_000 + i * 10), None);
        }
        t.record_failure("alice", "10.0.0.1", 1_100);
        assert_eq!(t.retry_after("alice", "10.0.0.1", 1_100), Some(WINDOW_SECONDS));
        assert_eq!(t.retry_after("ALICE ", "10.0.0.1", 1_399), Some(1));
        assert_eq!(t.retry_after("alice", "10.0.0.1", 1_400), None);
    }

    #[test]
    fn other_usernames_and_other_ips_are_not_locked() {
        let t = LoginThrottle::new();
        for _ in 0..MAX_FAILURES {
            t.record_failure("alice", "10.0.0.1", 1_000);
        }
        assert!(t.retry_after("alice", "10.0.0.1", 1_000).is_some());
        assert_eq!(t.retry_after("bob", "10.0.0.1", 1_000), None);
        assert_eq!(t.retry_after("alice", "10.0.0.2", 1_000), None);
    }

    #[test]
    fn failures_older_than_the_window_do_not_count() {
        let t = LoginThrottle::new();
        for i in 0..4 {
            t.record_failure("alice", "ip", 1_000 + i);
        }
        t.record_failure("alice", "ip", 1_000 + WINDOW_SECONDS + 10);
        assert_eq!(t.retry_after("alice", "ip", 1_000 + WINDOW_SECONDS + 10), None);
    }

    #[test]
    fn success_clears_the_count() {
        let t = LoginThrottle::new();
        for _ in 0..4 {
            t.record_failure("alice", "ip", 1_000);
        }
        t.clear("alice", "ip");
        t.record_failure("alice", "ip", 1_001);
        assert_eq!(t.retry_after("alice", "ip", 1_001), None);
    }
}
