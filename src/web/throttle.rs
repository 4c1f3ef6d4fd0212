//! Failed sign-in throttle: per (account, address), per address, and per account.
//!
//! Three budgets, all counted over [`WINDOW_SECONDS`] of the app clock:
//!
//! - **(account, address)**: [`MAX_FAILURES`] wrong passwords lock that pair for the window.
//! - **address**: [`MAX_FAILURES_PER_IP`] wrong passwords across all usernames lock the address
//!   (spraying many usernames from one place).
//! - **account**: [`ACCOUNT_BUDGET`] wrong passwords for one username from *unrecognised*
//!   browsers, whatever their addresses, lock that account *for unrecognised browsers only*.
//!   Without it, 30 addresses × 4 guesses = 120 guesses at one account went unthrottled.
//!   Each lock lasts twice as long as the one before (from [`WINDOW_SECONDS`] up to
//!   [`MAX_ACCOUNT_LOCK_SECONDS`]), so a patient botnet gets a handful of guesses a day, not
//!   thousands; the doubling starts again after a day without a lock.
//!
//! Why the account lock spares recognised browsers: a plain account-wide lock is a free
//! denial of service (anyone who knows a username locks its owner out). So, like OWASP's
//! "device cookies" scheme, a browser is *recognised* for an account when it proves a past
//! successful sign-in to that account, by either
//!
//! - a device cookie ([`super::device`]): an HMAC-signed cookie naming the account, set on every
//!   successful sign-in. Forging one needs the server's key; a stolen one gets its holder their
//!   own budget of [`MAX_FAILURES`] per window (then the cookie no longer counts), not the
//!   owner's freedom; or
//! - an address that signed in to the account successfully within [`KNOWN_ADDRESS_SECONDS`]
//!   (the owner whose cookies were cleared, at home or at the office).
//!
//! Recognised browsers are still held to the pair and address budgets, and their failures do
//! not count toward the account budget (the owner's typos do not lock the account). The price:
//! during an attack the owner signing in from a new browser *and* a new address waits like the
//! attacker, and is told how long.
//!
//! Limits of this first cut: it lives in memory, so each instance counts on its own and a
//! restart forgets. The address is an input (today the TCP peer; behind a reverse proxy every
//! user shares the proxy's address, where the account and device budgets still separate them).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::clock::Timestamp;

/// Wrong passwords allowed per window for one (username, IP), and for one device cookie.
pub const MAX_FAILURES: usize = 5;
/// Wrong passwords allowed per window from one IP across all usernames, so spraying many
/// usernames from one address is throttled too.
pub const MAX_FAILURES_PER_IP: usize = 30;
/// Wrong passwords allowed per window for one username from browsers it does not recognise.
pub const ACCOUNT_BUDGET: usize = 10;
/// Length of the counting window and of the pair, address and first account lockouts.
pub const WINDOW_SECONDS: i64 = 5 * 60;
/// The longest account lock; also how long a lock is remembered for the doubling.
pub const MAX_ACCOUNT_LOCK_SECONDS: i64 = 24 * 60 * 60;
/// How long an address that signed in to an account stays recognised for it.
pub const KNOWN_ADDRESS_SECONDS: i64 = 30 * 24 * 60 * 60;
/// Recognised addresses kept per account (the most recent).
const KNOWN_ADDRESSES_PER_ACCOUNT: usize = 16;
/// Above this many tracked buckets, stale ones are swept on the next failure.
const SWEEP_ABOVE: usize = 1024;

/// One sign-in attempt, as the throttle sees it.
#[derive(Debug, Clone, Copy)]
pub struct Attempt<'a> {
    /// The username typed (compared trimmed and case-folded).
    pub username: &'a str,
    /// The client address.
    pub ip: &'a str,
    /// The id of a device cookie whose signature proves a past sign-in to this username.
    pub device: Option<&'a str>,
}

/// Which budget a refusal comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    Pair,
    Address,
    Account,
}

impl Budget {
    pub fn as_str(self) -> &'static str {
        match self {
            Budget::Pair => "account_address",
            Budget::Address => "address",
            Budget::Account => "account",
        }
    }
}

/// A refused attempt: wait this many seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub retry_after: i64,
    pub budget: Budget,
}

/// The buckets failures are counted in. Usernames are keys, never secrets.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Bucket {
    Pair(String, String),
    Address(String),
    Account(String),
    Device(String, String),
}

#[derive(Debug, Default)]
struct Entry {
    /// Failures inside the current window, oldest first.
    failures: Vec<Timestamp>,
    locked_until: Option<Timestamp>,
    /// Account buckets: consecutive locks, for the doubling.
    strikes: u32,
}

impl Entry {
    fn is_stale(&self, now: Timestamp) -> bool {
        // A lock is kept a day past its end so the next one can double.
        let remembered = if self.strikes > 0 { MAX_ACCOUNT_LOCK_SECONDS } else { 0 };
        self.locked_until.is_none_or(|until| until + remembered <= now)
            && self.failures.iter().all(|&t| t <= now - WINDOW_SECONDS)
    }

    fn lock(&self, now: Timestamp) -> Option<Timestamp> {
        self.locked_until.filter(|&until| until > now)
    }

    /// Counts a failure; reaching `limit` starts a lock (doubling: twice the last one, if recent).
    fn fail(&mut self, now: Timestamp, limit: usize, doubling: bool) {
        self.failures.retain(|&t| t > now - WINDOW_SECONDS);
        self.failures.push(now);
        if self.failures.len() < limit {
            return;
        }
        self.failures.clear();
        let length = if doubling {
            let recent = self.locked_until.is_some_and(|until| until + MAX_ACCOUNT_LOCK_SECONDS > now);
            self.strikes = if recent { self.strikes.saturating_add(1) } else { 1 };
            let doublings = (self.strikes - 1).min(16);
            (WINDOW_SECONDS << doublings).min(MAX_ACCOUNT_LOCK_SECONDS)
        } else {
            WINDOW_SECONDS
        };
        self.locked_until = Some(now + length);
    }
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<Bucket, Entry>,
    /// Per account: addresses that signed in successfully, with when they last did.
    known_addresses: HashMap<String, Vec<(String, Timestamp)>>,
}

impl Inner {
    fn lock_of(&self, bucket: &Bucket, now: Timestamp) -> Option<Timestamp> {
        self.entries.get(bucket).and_then(|e| e.lock(now))
    }

    /// Whether the browser proves a past successful sign-in to the account.
    fn recognised(&self, account: &str, attempt: &Attempt<'_>, now: Timestamp) -> bool {
        let device_ok =
            attempt.device.is_some_and(|id| self.lock_of(&Bucket::Device(account.into(), id.into()), now).is_none());
        let address_known = self
            .known_addresses
            .get(account)
            .is_some_and(|known| known.iter().any(|(ip, at)| ip == attempt.ip && *at + KNOWN_ADDRESS_SECONDS > now));
        device_ok || address_known
    }

    fn sweep(&mut self, now: Timestamp) {
        if self.entries.len() > SWEEP_ABOVE {
            self.entries.retain(|_, entry| !entry.is_stale(now));
        }
        if self.known_addresses.len() > SWEEP_ABOVE {
            self.known_addresses.retain(|_, known| {
                known.retain(|(_, at)| *at + KNOWN_ADDRESS_SECONDS > now);
                !known.is_empty()
            });
        }
    }
}

#[derive(Debug, Default)]
pub struct LoginThrottle {
    inner: Mutex<Inner>,
}

fn account(username: &str) -> String {
    username.trim().to_lowercase()
}

impl LoginThrottle {
    pub fn new() -> Self {
        Self::default()
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether this attempt must be refused without checking the password, and for how long.
    pub fn check(&self, attempt: &Attempt<'_>, now: Timestamp) -> Option<Refusal> {
        let inner = self.inner();
        let account = account(attempt.username);
        let mut locks = vec![
            (Budget::Pair, inner.lock_of(&Bucket::Pair(account.clone(), attempt.ip.into()), now)),
            (Budget::Address, inner.lock_of(&Bucket::Address(attempt.ip.into()), now)),
        ];
        if !inner.recognised(&account, attempt, now) {
            locks.push((Budget::Account, inner.lock_of(&Bucket::Account(account.clone()), now)));
        }
        locks
            .into_iter()
            .filter_map(|(budget, until)| until.map(|until| Refusal { retry_after: until - now, budget }))
            .max_by_key(|refusal| refusal.retry_after)
    }

    /// Counts a wrong password in every budget it belongs to; reaching a limit starts a lock.
    pub fn record_failure(&self, attempt: &Attempt<'_>, now: Timestamp) {
        let mut inner = self.inner();
        inner.sweep(now);
        let account = account(attempt.username);
        let recognised = inner.recognised(&account, attempt, now);
        let mut buckets = vec![
            (Bucket::Pair(account.clone(), attempt.ip.into()), MAX_FAILURES, false),
            (Bucket::Address(attempt.ip.into()), MAX_FAILURES_PER_IP, false),
        ];
        if let Some(id) = attempt.device {
            buckets.push((Bucket::Device(account.clone(), id.into()), MAX_FAILURES, false));
        }
        if !recognised {
            buckets.push((Bucket::Account(account), ACCOUNT_BUDGET, true));
        }
        for (bucket, limit, doubling) in buckets {
            inner.entries.entry(bucket).or_default().fail(now, limit, doubling);
        }
    }

    /// A successful sign-in forgets the pair's and the device's failures and recognises the
    /// address for this account from now on. The address's and the account's counts stay: one
    /// valid sign-in must not reset a spray from the same address or a siege of the account.
    pub fn record_success(&self, attempt: &Attempt<'_>, now: Timestamp) {
        let mut inner = self.inner();
        let account = account(attempt.username);
        inner.entries.remove(&Bucket::Pair(account.clone(), attempt.ip.into()));
        if let Some(id) = attempt.device {
            inner.entries.remove(&Bucket::Device(account.clone(), id.into()));
        }
        let known = inner.known_addresses.entry(account).or_default();
        known.retain(|(ip, at)| ip != attempt.ip && *at + KNOWN_ADDRESS_SECONDS > now);
        known.push((attempt.ip.to_owned(), now));
        if known.len() > KNOWN_ADDRESSES_PER_ACCOUNT {
            known.remove(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(username: &'static str, ip: &'static str) -> Attempt<'static> {
        Attempt { username, ip, device: None }
    }

    fn wait(t: &LoginThrottle, attempt: Attempt<'_>, now: Timestamp) -> Option<i64> {
        t.check(&attempt, now).map(|r| r.retry_after)
    }

    #[test]
    fn five_failures_in_the_window_lock_the_pair_for_the_window() {
        let t = LoginThrottle::new();
        for i in 0..4 {
            t.record_failure(&from("alice", "10.0.0.1"), 1_000 + i * 10);
            assert_eq!(wait(&t, from("alice", "10.0.0.1"), 1_000 + i * 10), None);
        }
        t.record_failure(&from("alice", "10.0.0.1"), 1_100);
        assert_eq!(
            t.check(&from("alice", "10.0.0.1"), 1_100),
            Some(Refusal { retry_after: WINDOW_SECONDS, budget: Budget::Pair })
        );
        assert_eq!(wait(&t, from("ALICE ", "10.0.0.1"), 1_399), Some(1));
        assert_eq!(wait(&t, from("alice", "10.0.0.1"), 1_400), None);
    }

    #[test]
    fn other_usernames_and_other_ips_are_not_locked() {
        let t = LoginThrottle::new();
        for _ in 0..MAX_FAILURES {
            t.record_failure(&from("alice", "10.0.0.1"), 1_000);
        }
        assert!(wait(&t, from("alice", "10.0.0.1"), 1_000).is_some());
        assert_eq!(wait(&t, from("bob", "10.0.0.1"), 1_000), None);
        assert_eq!(wait(&t, from("alice", "10.0.0.2"), 1_000), None);
    }

    #[test]
    fn failures_older_than_the_window_do_not_count() {
        let t = LoginThrottle::new();
        for i in 0..4 {
            t.record_failure(&from("alice", "ip"), 1_000 + i);
        }
        t.record_failure(&from("alice", "ip"), 1_000 + WINDOW_SECONDS + 10);
        assert_eq!(wait(&t, from("alice", "ip"), 1_000 + WINDOW_SECONDS + 10), None);
    }

    #[test]
    fn success_clears_the_pair_count() {
        let t = LoginThrottle::new();
        for _ in 0..4 {
            t.record_failure(&from("alice", "ip"), 1_000);
        }
        t.record_success(&from("alice", "ip"), 1_000);
        t.record_failure(&from("alice", "ip"), 1_001);
        assert_eq!(wait(&t, from("alice", "ip"), 1_001), None);
    }

    /// The attack that was found: many addresses, each staying under the pair limit.
    fn siege(t: &LoginThrottle, username: &'static str, now: Timestamp) {
        let addresses: Vec<&'static str> =
            (0..30).map(|i| &*Box::leak(format!("203.0.113.{i}").into_boxed_str())).collect();
        for ip in addresses {
            for _ in 0..(MAX_FAILURES - 1) {
                if t.check(&from(username, ip), now).is_none() {
                    t.record_failure(&from(username, ip), now);
                }
            }
        }
    }

    #[test]
    fn guesses_from_many_addresses_exhaust_the_account_budget() {
        let t = LoginThrottle::new();
        let guesses = (0..30)
            .flat_map(|i| std::iter::repeat_n(i, MAX_FAILURES - 1))
            .filter(|i| {
                let ip = Box::leak(format!("203.0.113.{i}").into_boxed_str());
                let attempt = from("alice", ip);
                let allowed = t.check(&attempt, 1_000).is_none();
                if allowed {
                    t.record_failure(&attempt, 1_000);
                }
                allowed
            })
            .count();
        assert_eq!(guesses, ACCOUNT_BUDGET, "120 tries, only the budget reached the password check");
        let refusal = t.check(&from("alice", "198.51.100.7"), 1_000).unwrap();
        assert_eq!(refusal.budget, Budget::Account);
        assert_eq!(refusal.retry_after, WINDOW_SECONDS);
        assert_eq!(wait(&t, from("bob", "198.51.100.7"), 1_000), None, "other accounts are untouched");
    }

    #[test]
    fn the_owner_is_recognised_by_a_device_cookie_or_a_known_address_during_a_siege() {
        let t = LoginThrottle::new();
        let device = Attempt { username: "alice", ip: "192.0.2.1", device: Some("laptop") };
        t.record_success(&device, 900);
        siege(&t, "alice", 1_000);
        assert_eq!(t.check(&from("alice", "198.51.100.7"), 1_000).map(|r| r.budget), Some(Budget::Account));
        // The laptop's cookie, from a new network; and the home address, cookies cleared.
        let travelling = Attempt { username: "Alice", ip: "198.51.100.99", device: Some("laptop") };
        assert_eq!(t.check(&travelling, 1_000), None);
        assert_eq!(t.check(&from("alice", "192.0.2.1"), 1_000), None);
        // A cookie proves nothing for another account.
        assert!(t.check(&Attempt { username: "alice", ip: "198.51.100.99", device: None }, 1_000).is_some());
    }

    #[test]
    fn a_stolen_device_cookie_gets_its_own_small_budget_only() {
        let t = LoginThrottle::new();
        siege(&t, "alice", 1_000);
        for i in 0..MAX_FAILURES {
            let ip = Box::leak(format!("198.51.100.{i}").into_boxed_str());
            let attempt = Attempt { username: "alice", ip, device: Some("stolen") };
            assert_eq!(t.check(&attempt, 1_000), None, "guess {i}");
            t.record_failure(&attempt, 1_000);
        }
        let next = Attempt { username: "alice", ip: "198.51.100.200", device: Some("stolen") };
        assert_eq!(t.check(&next, 1_000).map(|r| r.budget), Some(Budget::Account), "the cookie no longer counts");
    }

    #[test]
    fn the_owners_own_typos_do_not_lock_the_account() {
        let t = LoginThrottle::new();
        let home = from("alice", "192.0.2.1");
        t.record_success(&home, 900);
        for i in 0..ACCOUNT_BUDGET as i64 * 2 {
            // Spread over time so the pair limit is not what we test.
            t.record_failure(&home, 1_000 + i * WINDOW_SECONDS);
        }
        assert_eq!(wait(&t, from("alice", "198.51.100.7"), 1_000 + 40 * WINDOW_SECONDS), None);
    }

    #[test]
    fn each_account_lock_in_a_row_lasts_twice_as_long_up_to_a_day() {
        let t = LoginThrottle::new();
        let mut now = 1_000;
        let mut lengths = Vec::new();
        for round in 0..12 {
            for i in 0..ACCOUNT_BUDGET {
                let ip = Box::leak(format!("203.0.{round}.{i}").into_boxed_str());
                t.record_failure(&from("alice", ip), now);
            }
            let wait = wait(&t, from("alice", "198.51.100.7"), now).unwrap();
            lengths.push(wait);
            now += wait;
        }
        assert_eq!(&lengths[..4], &[WINDOW_SECONDS, 2 * WINDOW_SECONDS, 4 * WINDOW_SECONDS, 8 * WINDOW_SECONDS]);
        assert_eq!(*lengths.last().unwrap(), MAX_ACCOUNT_LOCK_SECONDS);
        // A quiet day later the doubling starts again.
        now += MAX_ACCOUNT_LOCK_SECONDS + 1;
        for i in 0..ACCOUNT_BUDGET {
            let ip = Box::leak(format!("203.1.0.{i}").into_boxed_str());
            t.record_failure(&from("alice", ip), now);
        }
        assert_eq!(wait(&t, from("alice", "198.51.100.7"), now), Some(WINDOW_SECONDS));
    }

    #[test]
    fn a_known_address_expires() {
        let t = LoginThrottle::new();
        t.record_success(&from("alice", "192.0.2.1"), 0);
        let later = KNOWN_ADDRESS_SECONDS + 10;
        siege(&t, "alice", later);
        assert!(t.check(&from("alice", "192.0.2.1"), later).is_some());
    }
}
