//! When may an answer read from the database earlier still be used? (issue 11)
//!
//! Caches of what every tool call reads (verified bearer tokens in
//! [`crate::identity::bearer_cache`], a user's grants with a client's consents in
//! [`super::grant_cache`], the demo provider's live tokens) tag what they keep with the
//! *generation* of the user it belongs to (or everyone's) and use it only while that generation
//! has not moved; [`super::generation_cache`] is the map they share. A user's generation is the later of two
//! moves, both steps of one counter ([`Freshness::tick`]):
//! - the user's own: a write of this process that names the user (their grants, consents, their
//!   `users` row; see [`super::Db`]'s `user`) moves only that user's, when it has finished, so a
//!   change made through this server is seen by its very next request and other users' caches
//!   stay warm;
//! - everyone's: a write of this process that names no user, and a change another process made
//!   (another instance, the admin CLI, hand-written SQL). Triggers move the `auth_epoch`
//!   counter (migrations 0012, 0015 and 0017) and count this process's own moves apart (0016);
//!   a background task reads both every [`POLL_EVERY`], and only a move by someone else moves
//!   every generation (this process's own writes moved theirs already). Such a change is
//!   therefore seen within one poll interval plus one read.
//!
//! Without a watcher (admin commands, a watcher that stopped or cannot read the database)
//! [`Freshness::generation`] is `None` and callers go to the database as before: a cache is
//! used only while the last successful poll started less than [`TRUSTED_FOR`] ago.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::Store;

/// How often the counter other processes move is read.
pub const POLL_EVERY: Duration = Duration::from_millis(50);
/// Caches are trusted only while the watcher's last successful read started less than this
/// long ago: the upper bound on how late another process's change can be seen.
pub const TRUSTED_FOR: Duration = Duration::from_millis(500);
/// At most this many users' own moves are remembered; beyond, they are forgotten and everyone's
/// generation moves instead (which only costs refills).
pub const USERS_TRACKED: usize = 100_000;

/// Shared by every clone of a [`Store`].
#[derive(Debug)]
pub struct Freshness {
    moves: Mutex<Moves>,
    /// When the last successful poll started, in milliseconds after `origin` plus one
    /// (0: never).
    polled_at: AtomicU64,
    /// Successful polls since start (tests wait for the watcher with it).
    polls: AtomicU64,
    /// How often a cache was asked while the watcher was late (tests tell a late poll apart).
    lapses: AtomicU64,
    origin: Instant,
}

#[derive(Debug, Default)]
struct Moves {
    /// Every move takes the next step.
    tick: u64,
    /// The step of the last move of everyone's generation.
    everyone: u64,
    /// The step of each user's last own move, where later than `everyone`.
    users: HashMap<String, u64>,
}

impl Default for Freshness {
    fn default() -> Self {
        Self {
            moves: Mutex::default(),
            polled_at: AtomicU64::new(0),
            polls: AtomicU64::new(0),
            lapses: AtomicU64::new(0),
            origin: Instant::now(),
        }
    }
}

impl Freshness {
    fn moves(&self) -> std::sync::MutexGuard<'_, Moves> {
        self.moves.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Something was written that may concern anyone: whatever was read before may be out of
    /// date.
    pub fn written(&self) {
        let mut moves = self.moves();
        moves.tick += 1;
        moves.everyone = moves.tick;
        // Every user's own step is now older than everyone's: nothing to keep.
        moves.users.clear();
    }

    /// Something of `user_id`'s was written: what was read for them before may be out of date.
    pub fn written_for(&self, user_id: &str) {
        let mut moves = self.moves();
        moves.tick += 1;
        if moves.users.len() >= USERS_TRACKED && !moves.users.contains_key(user_id) {
            moves.everyone = moves.tick;
            moves.users.clear();
            return;
        }
        let tick = moves.tick;
        moves.users.insert(user_id.to_owned(), tick);
    }

    /// The step now, taken before a read whose answer is to be kept: the answer may be kept
    /// under the user's [`Freshness::generation`] read after it only if that is not later
    /// (nothing of theirs moved meanwhile). `None` when nothing may be kept.
    pub fn tick(&self) -> Option<u64> {
        self.trusted().then(|| self.moves().tick)
    }

    /// `user_id`'s current generation, or `None` when other processes' changes are not being
    /// watched closely enough for anything cached to be trusted.
    pub fn generation(&self, user_id: &str) -> Option<u64> {
        if !self.trusted() {
            return None;
        }
        let moves = self.moves();
        Some(moves.users.get(user_id).copied().unwrap_or(0).max(moves.everyone))
    }

    /// Everyone's generation alone, for caches of what belongs to no user (the demo provider's
    /// tokens): moved by this process's writes that name no user and by other processes'
    /// changes, not by one user's own writes. `None` as for [`Freshness::generation`].
    pub fn shared_generation(&self) -> Option<u64> {
        self.trusted().then(|| self.moves().everyone)
    }

    fn trusted(&self) -> bool {
        let polled = self.polled_at.load(Ordering::SeqCst);
        if polled == 0 {
            return false;
        }
        let age = self.millis_now().saturating_sub(polled - 1);
        if age > TRUSTED_FOR.as_millis() as u64 {
            self.lapses.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    fn millis_now(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }
}

impl Store {
    /// See [`Freshness::tick`].
    pub fn cache_tick(&self) -> Option<u64> {
        self.freshness.tick()
    }

    /// See [`Freshness::generation`].
    pub fn cache_generation(&self, user_id: &str) -> Option<u64> {
        self.freshness.generation(user_id)
    }

    /// See [`Freshness::shared_generation`].
    pub fn cache_shared_generation(&self) -> Option<u64> {
        self.freshness.shared_generation()
    }

    /// Successful reads of the other writers' counter since start, and how often a cache was
    /// asked while the last one was too old to trust; tests wait for the first and tell a
    /// late watcher on a loaded machine apart with the second.
    pub fn watcher_counts(&self) -> (u64, u64) {
        (self.freshness.polls.load(Ordering::SeqCst), self.freshness.lapses.load(Ordering::SeqCst))
    }

    /// Reads what other processes moved every [`POLL_EVERY`] until `shutdown`, moving every
    /// generation when it changed; the first read happens before this returns, so caches are
    /// usable as soon as the server serves.
    pub async fn watch_other_writers(&self, shutdown: CancellationToken) {
        let mut last = None;
        self.poll_once(&mut last).await;
        let store = self.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(POLL_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = every.tick() => store.poll_once(&mut last).await,
                }
            }
        });
    }

    /// One read of the moves made by others: the counter less this process's own count, read in
    /// one statement so both come from the same snapshot. Not counted in [`Store::queries_run`]
    /// (it is nobody's request) and bounded like every call.
    async fn poll_once(&self, last: &mut Option<i64>) {
        let started = self.freshness.millis_now() + 1;
        let read = sqlx::query_as::<_, (i64,)>(
            "SELECT e.n - COALESCE((SELECT w.n FROM auth_epoch_writers w WHERE w.writer = $1), 0) \
             FROM auth_epoch e WHERE e.id = 1",
        )
        .bind(&*self.writer)
        .fetch_one(self.pool());
        match tokio::time::timeout(self.timeouts.query, read).await {
            Ok(Ok((others,))) => {
                if *last != Some(others) {
                    self.freshness.written();
                    *last = Some(others);
                }
                self.freshness.polled_at.store(started, Ordering::SeqCst);
                self.freshness.polls.fetch_add(1, Ordering::SeqCst);
            }
            Ok(Err(error)) => tracing::warn!(%error, "could not read the access counter; caches are not used"),
            Err(_) => tracing::warn!("the access counter read timed out; caches are not used"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched() -> Freshness {
        let freshness = Freshness::default();
        freshness.polled_at.store(freshness.millis_now() + 1, Ordering::SeqCst);
        freshness
    }

    #[test]
    fn nothing_is_trusted_before_the_first_poll_and_a_write_moves_the_generation() {
        let freshness = Freshness::default();
        assert_eq!(freshness.generation("u"), None);
        assert_eq!(freshness.tick(), None);
        let freshness = watched();
        let before = freshness.generation("u").unwrap();
        freshness.written();
        assert!(freshness.generation("u").unwrap() > before);
    }

    #[test]
    fn a_users_write_moves_only_that_users_generation() {
        let freshness = watched();
        let (alice, bob) = (freshness.generation("alice").unwrap(), freshness.generation("bob").unwrap());
        let before = freshness.tick().unwrap();
        freshness.written_for("bob");
        assert_eq!(freshness.generation("alice"), Some(alice), "alice's cache stays");
        let bob_now = freshness.generation("bob").unwrap();
        assert!(bob_now > bob && bob_now > before, "bob's moved past what was read before");
        freshness.written();
        assert!(freshness.generation("alice").unwrap() > alice, "a write naming no one moves everyone's");
        assert!(freshness.generation("bob").unwrap() > bob_now);
    }

    #[test]
    fn a_full_table_of_users_moves_everyone_instead_of_forgetting_a_move() {
        let freshness = watched();
        for i in 0..USERS_TRACKED {
            freshness.written_for(&format!("u{i}"));
        }
        let seen = freshness.generation("u0").unwrap();
        freshness.written_for("one more");
        assert!(freshness.generation("one more").unwrap() > seen);
        assert!(freshness.generation("u0").unwrap() > seen, "forgotten users moved with everyone");
    }

    #[test]
    fn a_watcher_that_stopped_polling_is_not_trusted() {
        let freshness = Freshness { origin: Instant::now() - Duration::from_secs(10), ..Default::default() };
        freshness.polled_at.store(1, Ordering::SeqCst);
        assert_eq!(freshness.generation("u"), None);
        assert_eq!(freshness.lapses.load(Ordering::SeqCst), 1);
    }
}
