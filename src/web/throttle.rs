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
//! The counts live in the database (migration 0010), so every instance on it counts the same
//! attempts and a restart forgets nothing. Two instances counting the same bucket's last
//! failure at the same moment may both start its lock (the same lock; an account's doubling
//! may then count one extra strike). The address is the client's, as
//! [`crate::net::client_address`] finds it (the TCP peer, or what a trusted proxy says).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::Timestamp;
use crate::store::throttle::ThrottleLock;
use crate::store::{Store, StoreResult};

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
const KNOWN_ADDRESSES_PER_ACCOUNT: i64 = 16;
/// Stale rows are swept on every this many failures counted by this process.
const SWEEP_EVERY: u64 = 64;

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

impl Bucket {
    /// The bucket's key in the database: JSON, so no username can pass for another bucket.
    fn key(&self) -> String {
        let parts: (&str, &str, Option<&str>) = match self {
            Bucket::Pair(account, ip) => ("pair", account, Some(ip)),
            Bucket::Address(ip) => ("address", ip, None),
            Bucket::Account(account) => ("account", account, None),
            Bucket::Device(account, id) => ("device", account, Some(id)),
        };
        serde_json::to_string(&parts).unwrap_or_default()
    }
}

fn account(username: &str) -> String {
    username.trim().to_lowercase()
}

/// The bucket's lock end, if it is locked at `now`.
async fn lock_of(store: &Store, bucket: &Bucket, now: Timestamp) -> StoreResult<Option<Timestamp>> {
    Ok(store.throttle().lock(&bucket.key()).await?.map(|lock| lock.locked_until).filter(|&until| until > now))
}

/// Whether the browser proves a past successful sign-in to the account.
async fn recognised(store: &Store, account: &str, attempt: &Attempt<'_>, now: Timestamp) -> StoreResult<bool> {
    if let Some(id) = attempt.device
        && lock_of(store, &Bucket::Device(account.into(), id.into()), now).await?.is_none()
    {
        return Ok(true);
    }
    store.throttle().address_known(account, attempt.ip, now - KNOWN_ADDRESS_SECONDS).await
}

/// Counts a failure; reaching `limit` starts a lock (doubling: twice the last one, if recent).
async fn fail(store: &Store, bucket: &Bucket, now: Timestamp, limit: usize, doubling: bool) -> StoreResult<()> {
    let key = bucket.key();
    let count = store.throttle().count_failure(&key, now, now - WINDOW_SECONDS).await?;
    if count < limit as i64 {
        return Ok(());
    }
    let lock = if doubling {
        let previous = store.throttle().lock(&key).await?;
        let recent = previous.filter(|lock| lock.locked_until + MAX_ACCOUNT_LOCK_SECONDS > now);
        let strikes = recent.map_or(1, |lock| lock.strikes.saturating_add(1));
        let doublings = (strikes - 1).clamp(0, 16);
        ThrottleLock { locked_until: now + (WINDOW_SECONDS << doublings).min(MAX_ACCOUNT_LOCK_SECONDS), strikes }
    } else {
        ThrottleLock { locked_until: now + WINDOW_SECONDS, strikes: 0 }
    };
    store.throttle().set_lock(&key, lock).await
}

/// Failures this process counted, for the occasional sweep.
static FAILURES_COUNTED: AtomicU64 = AtomicU64::new(0);

/// Whether this attempt must be refused without checking the password, and for how long.
pub async fn check(store: &Store, attempt: &Attempt<'_>, now: Timestamp) -> StoreResult<Option<Refusal>> {
    let account = account(attempt.username);
    let mut locks = vec![
        (Budget::Pair, lock_of(store, &Bucket::Pair(account.clone(), attempt.ip.into()), now).await?),
        (Budget::Address, lock_of(store, &Bucket::Address(attempt.ip.into()), now).await?),
    ];
    if !recognised(store, &account, attempt, now).await? {
        locks.push((Budget::Account, lock_of(store, &Bucket::Account(account.clone()), now).await?));
    }
    Ok(locks
        .into_iter()
        .filter_map(|(budget, until)| until.map(|until| Refusal { retry_after: until - now, budget }))
        .max_by_key(|refusal| refusal.retry_after))
}

/// Counts a wrong password in every budget it belongs to; reaching a limit starts a lock.
pub async fn record_failure(store: &Store, attempt: &Attempt<'_>, now: Timestamp) -> StoreResult<()> {
    if FAILURES_COUNTED.fetch_add(1, Ordering::Relaxed).is_multiple_of(SWEEP_EVERY) {
        // A lock is kept a day past its end so the next one can double.
        store
            .throttle()
            .sweep(
                now - WINDOW_SECONDS.max(crate::store::throttle::LONGEST_WINDOW_SECONDS),
                now - MAX_ACCOUNT_LOCK_SECONDS,
                now - KNOWN_ADDRESS_SECONDS,
            )
            .await?;
    }
    let account = account(attempt.username);
    let recognised = recognised(store, &account, attempt, now).await?;
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
        fail(store, &bucket, now, limit, doubling).await?;
    }
    Ok(())
}

/// A successful sign-in forgets the pair's and the device's failures and recognises the
/// address for this account from now on. The address's and the account's counts stay: one
/// valid sign-in must not reset a spray from the same address or a siege of the account.
pub async fn record_success(store: &Store, attempt: &Attempt<'_>, now: Timestamp) -> StoreResult<()> {
    let account = account(attempt.username);
    store.throttle().clear(&Bucket::Pair(account.clone(), attempt.ip.into()).key()).await?;
    if let Some(id) = attempt.device {
        store.throttle().clear(&Bucket::Device(account.clone(), id.into()).key()).await?;
    }
    store.throttle().remember_address(&account, attempt.ip, now, KNOWN_ADDRESSES_PER_ACCOUNT).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The throttle on a fresh SQLite database (the same queries run on PostgreSQL; the
    /// two-instance test in tests/api/operating/cluster.rs runs them there).
    struct T {
        store: Store,
        _dir: tempfile::TempDir,
    }

    impl T {
        async fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::connect(&format!("sqlite://{}/t.db?mode=rwc", dir.path().display())).await.unwrap();
            store.migrate().await.unwrap();
            Self { store, _dir: dir }
        }

        async fn check(&self, attempt: &Attempt<'_>, now: Timestamp) -> Option<Refusal> {
            check(&self.store, attempt, now).await.unwrap()
        }

        async fn record_failure(&self, attempt: &Attempt<'_>, now: Timestamp) {
            record_failure(&self.store, attempt, now).await.unwrap()
        }

        async fn record_success(&self, attempt: &Attempt<'_>, now: Timestamp) {
            record_success(&self.store, attempt, now).await.unwrap()
        }
    }

    fn from(username: &'static str, ip: &'static str) -> Attempt<'static> {
        Attempt { username, ip, device: None }
    }

    fn leak(text: String) -> &'static str {
        Box::leak(text.into_boxed_str())
    }

    async fn wait(t: &T, attempt: Attempt<'_>, now: Timestamp) -> Option<i64> {
        t.check(&attempt, now).await.map(|r| r.retry_after)
    }

    #[tokio::test]
    async fn five_failures_in_the_window_lock_the_pair_for_the_window() {
        let t = T::new().await;
        for i in 0..4 {
            t.record_failure(&from("alice", "10.0.0.1"), 1_000 + i * 10).await;
            assert_eq!(wait(&t, from("alice", "10.0.0.1"), 1_000 + i * 10).await, None);
        }
        t.record_failure(&from("alice", "10.0.0.1"), 1_100).await;
        assert_eq!(
            t.check(&from("alice", "10.0.0.1"), 1_100).await,
            Some(Refusal { retry_after: WINDOW_SECONDS, budget: Budget::Pair })
        );
        assert_eq!(wait(&t, from("ALICE ", "10.0.0.1"), 1_399).await, Some(1));
        assert_eq!(wait(&t, from("alice", "10.0.0.1"), 1_400).await, None);
    }

    #[tokio::test]
    async fn other_usernames_and_other_ips_are_not_locked() {
        let t = T::new().await;
        for _ in 0..MAX_FAILURES {
            t.record_failure(&from("alice", "10.0.0.1"), 1_000).await;
        }
        assert!(wait(&t, from("alice", "10.0.0.1"), 1_000).await.is_some());
        assert_eq!(wait(&t, from("bob", "10.0.0.1"), 1_000).await, None);
        assert_eq!(wait(&t, from("alice", "10.0.0.2"), 1_000).await, None);
    }

    #[tokio::test]
    async fn a_username_cannot_pass_for_another_bucket() {
        let t = T::new().await;
        // A username shaped like the key of another bucket stays a username.
        for _ in 0..MAX_FAILURES {
            t.record_failure(&from("alice\",\"10.0.0.1", "10.0.0.1"), 1_000).await;
        }
        assert_eq!(wait(&t, from("alice", "10.0.0.1"), 1_000).await, None);
    }

    #[tokio::test]
    async fn failures_older_than_the_window_do_not_count() {
        let t = T::new().await;
        for i in 0..4 {
            t.record_failure(&from("alice", "ip"), 1_000 + i).await;
        }
        t.record_failure(&from("alice", "ip"), 1_000 + WINDOW_SECONDS + 10).await;
        assert_eq!(wait(&t, from("alice", "ip"), 1_000 + WINDOW_SECONDS + 10).await, None);
    }

    #[tokio::test]
    async fn success_clears_the_pair_count() {
        let t = T::new().await;
        for _ in 0..4 {
            t.record_failure(&from("alice", "ip"), 1_000).await;
        }
        t.record_success(&from("alice", "ip"), 1_000).await;
        t.record_failure(&from("alice", "ip"), 1_001).await;
        assert_eq!(wait(&t, from("alice", "ip"), 1_001).await, None);
    }

    /// The attack that was found: many addresses, each staying under the pair limit.
    async fn siege(t: &T, username: &'static str, now: Timestamp) {
        for i in 0..30 {
            let ip = leak(format!("203.0.113.{i}"));
            for _ in 0..(MAX_FAILURES - 1) {
                if t.check(&from(username, ip), now).await.is_none() {
                    t.record_failure(&from(username, ip), now).await;
                }
            }
        }
    }

    #[tokio::test]
    async fn guesses_from_many_addresses_exhaust_the_account_budget() {
        let t = T::new().await;
        let mut guesses = 0;
        for i in 0..30 {
            let ip = leak(format!("203.0.113.{i}"));
            for _ in 0..(MAX_FAILURES - 1) {
                let attempt = from("alice", ip);
                if t.check(&attempt, 1_000).await.is_none() {
                    t.record_failure(&attempt, 1_000).await;
                    guesses += 1;
                }
            }
        }
        assert_eq!(guesses, ACCOUNT_BUDGET, "120 tries, only the budget reached the password check");
        let refusal = t.check(&from("alice", "198.51.100.7"), 1_000).await.unwrap();
        assert_eq!(refusal.budget, Budget::Account);
        assert_eq!(refusal.retry_after, WINDOW_SECONDS);
        assert_eq!(wait(&t, from("bob", "198.51.100.7"), 1_000).await, None, "other accounts are untouched");
    }

    #[tokio::test]
    async fn the_owner_is_recognised_by_a_device_cookie_or_a_known_address_during_a_siege() {
        let t = T::new().await;
        let device = Attempt { username: "alice", ip: "192.0.2.1", device: Some("laptop") };
        t.record_success(&device, 900).await;
        siege(&t, "alice", 1_000).await;
        assert_eq!(t.check(&from("alice", "198.51.100.7"), 1_000).await.map(|r| r.budget), Some(Budget::Account));
        // The laptop's cookie, from a new network; and the home address, cookies cleared.
        let travelling = Attempt { username: "Alice", ip: "198.51.100.99", device: Some("laptop") };
        assert_eq!(t.check(&travelling, 1_000).await, None);
        assert_eq!(t.check(&from("alice", "192.0.2.1"), 1_000).await, None);
        // A cookie proves nothing for another account.
        assert!(t.check(&Attempt { username: "alice", ip: "198.51.100.99", device: None }, 1_000).await.is_some());
    }

    #[tokio::test]
    async fn a_stolen_device_cookie_gets_its_own_small_budget_only() {
        let t = T::new().await;
        siege(&t, "alice", 1_000).await;
        for i in 0..MAX_FAILURES {
            let ip = leak(format!("198.51.100.{i}"));
            let attempt = Attempt { username: "alice", ip, device: Some("stolen") };
            assert_eq!(t.check(&attempt, 1_000).await, None, "guess {i}");
            t.record_failure(&attempt, 1_000).await;
        }
        let next = Attempt { username: "alice", ip: "198.51.100.200", device: Some("stolen") };
        assert_eq!(t.check(&next, 1_000).await.map(|r| r.budget), Some(Budget::Account), "the cookie no longer counts");
    }

    #[tokio::test]
    async fn the_owners_own_typos_do_not_lock_the_account() {
        let t = T::new().await;
        let home = from("alice", "192.0.2.1");
        t.record_success(&home, 900).await;
        for i in 0..ACCOUNT_BUDGET as i64 * 2 {
            // Spread over time so the pair limit is not what we test.
            t.record_failure(&home, 1_000 + i * WINDOW_SECONDS).await;
        }
        assert_eq!(wait(&t, from("alice", "198.51.100.7"), 1_000 + 40 * WINDOW_SECONDS).await, None);
    }

    #[tokio::test]
    async fn each_account_lock_in_a_row_lasts_twice_as_long_up_to_a_day() {
        let t = T::new().await;
        let mut now = 1_000;
        let mut lengths = Vec::new();
        for round in 0..12 {
            for i in 0..ACCOUNT_BUDGET {
                let ip = leak(format!("203.0.{round}.{i}"));
                t.record_failure(&from("alice", ip), now).await;
            }
            let wait = wait(&t, from("alice", "198.51.100.7"), now).await.unwrap();
            lengths.push(wait);
            now += wait;
        }
        assert_eq!(&lengths[..4], &[WINDOW_SECONDS, 2 * WINDOW_SECONDS, 4 * WINDOW_SECONDS, 8 * WINDOW_SECONDS]);
        assert_eq!(*lengths.last().unwrap(), MAX_ACCOUNT_LOCK_SECONDS);
        // A quiet day later the doubling starts again.
        now += MAX_ACCOUNT_LOCK_SECONDS + 1;
        for i in 0..ACCOUNT_BUDGET {
            let ip = leak(format!("203.1.0.{i}"));
            t.record_failure(&from("alice", ip), now).await;
        }
        assert_eq!(wait(&t, from("alice", "198.51.100.7"), now).await, Some(WINDOW_SECONDS));
    }

    #[tokio::test]
    async fn a_known_address_expires() {
        let t = T::new().await;
        t.record_success(&from("alice", "192.0.2.1"), 0).await;
        let later = KNOWN_ADDRESS_SECONDS + 10;
        siege(&t, "alice", later).await;
        assert!(t.check(&from("alice", "192.0.2.1"), later).await.is_some());
    }
}
