//! Cache generations: when may an answer read from the database earlier still be used?
//!
//!
//! Caches of what every tool call reads (verified bearer tokens in `src/identity/bearer_cache.rs`,
//! a user's grants with a client's consents in `src/store/grants/cache.rs`, the demo provider's
//! live tokens in `src/demo_provider/token_cache.rs`) tag what they keep with the *generation* of
//! the user it belongs to (or everyone's) and use it only while that generation has not moved;
//! [`super::generation_cache`] is the map they share. What they read are the rows of `users`,
//! `oauth_grants`, `grants`, `client_consents` and `demo_tokens`: the tables whose changes move the
//! `auth_epoch` counter (migrations 0012, 0015 and 0017). A user's generation is the later of two
//! moves, both steps of one counter ([`Generations::tick`]):
//! - the user's own: a write of this process declared [`CacheEffect::User`] (their grants,
//!   consents, their `users` row) moves only that user's, when it has finished, so a change made
//!   through this server is seen by its very next request and other users' caches stay warm;
//! - everyone's: a write of this process declared [`CacheEffect::Everyone`], and a change
//!   another process made (another instance, the admin CLI, hand-written SQL). The triggers
//!   count this process's own moves of `auth_epoch` apart (migration 0016, [`super::own_moves`]);
//!   a background task reads both every [`POLL_EVERY`], and only a move by someone else moves
//!   every generation (this process's own writes moved theirs already). Such a change is
//!   therefore seen within one poll interval plus one read.
//!
//! Which write moves what is declared with each statement ([`super::cache_effect`]).
//!
//! Without a watcher (admin commands, a watcher that stopped or cannot read the database)
//! [`Generations::generation`] is `None` and callers go to the database as before: a cache is
//! used only while the last successful poll started less than [`TRUSTED_FOR`] ago.
//!
//! [`CacheEffect::User`]: super::cache_effect::CacheEffect::User
//! [`CacheEffect::Everyone`]: super::cache_effect::CacheEffect::Everyone

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
pub struct Generations {
    moves: Mutex<Moves>,
    /// When the last successful poll started, in milliseconds after `origin` plus one
    /// (0: never).
    pub(super) polled_at: AtomicU64,
    /// Successful polls since start (tests wait for the watcher with it).
    pub(super) polls: AtomicU64,
    /// How often a cache was asked while the watcher was late (tests tell a late poll apart).
    pub(super) lapses: AtomicU64,
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

impl Default for Generations {
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

impl Generations {
    fn moves(&self) -> std::sync::MutexGuard<'_, Moves> {
        self.moves.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Something was written that may concern anyone ([`CacheEffect::Everyone`]): whatever
    /// was read before may be out of date.
    ///
    /// [`CacheEffect::Everyone`]: super::cache_effect::CacheEffect::Everyone
    pub fn move_everyone(&self) {
        let mut moves = self.moves();
        moves.tick += 1;
        moves.everyone = moves.tick;
        // Every user's own step is now older than everyone's: nothing to keep.
        moves.users.clear();
    }

    /// Something of `user_id`'s was written ([`CacheEffect::User`]): what was read for them
    /// before may be out of date.
    ///
    /// [`CacheEffect::User`]: super::cache_effect::CacheEffect::User
    pub fn move_user(&self, user_id: &str) {
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
    /// under the user's [`Generations::generation`] read after it only if that is not later
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
    /// changes, not by one user's own writes. `None` as for [`Generations::generation`].
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

    pub(super) fn millis_now(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }
}

#[cfg(test)]
impl Generations {
    /// The step of everyone's last move and of `user_id`'s own last move (0: none kept),
    /// trusted or not: what the handles' tests check.
    pub(super) fn steps(&self, user_id: &str) -> (u64, u64) {
        let moves = self.moves();
        (moves.everyone, moves.users.get(user_id).copied().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched() -> Generations {
        let generations = Generations::default();
        polled_now(&generations);
        generations
    }

    /// As if the watcher had just read the counter.
    fn polled_now(generations: &Generations) {
        generations.polled_at.store(generations.millis_now() + 1, Ordering::SeqCst);
    }

    #[test]
    fn nothing_is_trusted_before_the_first_poll_and_a_write_moves_the_generation() {
        let generations = Generations::default();
        assert_eq!(generations.generation("u"), None);
        assert_eq!(generations.tick(), None);
        let generations = watched();
        let before = generations.generation("u").unwrap();
        generations.move_everyone();
        assert!(generations.generation("u").unwrap() > before);
    }

    #[test]
    fn a_users_write_moves_only_that_users_generation() {
        let generations = watched();
        let (alice, bob) = (generations.generation("alice").unwrap(), generations.generation("bob").unwrap());
        let before = generations.tick().unwrap();
        generations.move_user("bob");
        assert_eq!(generations.generation("alice"), Some(alice), "alice's cache stays");
        let bob_now = generations.generation("bob").unwrap();
        assert!(bob_now > bob && bob_now > before, "bob's moved past what was read before");
        generations.move_everyone();
        assert!(generations.generation("alice").unwrap() > alice, "a write naming no one moves everyone's");
        assert!(generations.generation("bob").unwrap() > bob_now);
    }

    #[test]
    fn a_full_table_of_users_moves_everyone_instead_of_forgetting_a_move() {
        let generations = watched();
        for i in 0..USERS_TRACKED {
            generations.move_user(&format!("u{i}"));
        }
        // The loop may outlast the trust window on a loaded machine.
        polled_now(&generations);
        let seen = generations.generation("u0").unwrap();
        generations.move_user("one more");
        assert!(generations.generation("one more").unwrap() > seen);
        assert!(generations.generation("u0").unwrap() > seen, "forgotten users moved with everyone");
    }

    #[test]
    fn a_watcher_that_stopped_polling_is_not_trusted() {
        let generations = Generations { origin: Instant::now() - Duration::from_secs(10), ..Default::default() };
        generations.polled_at.store(1, Ordering::SeqCst);
        assert_eq!(generations.generation("u"), None);
        assert_eq!(generations.lapses.load(Ordering::SeqCst), 1);
    }
}
