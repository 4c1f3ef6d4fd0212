//! When may an answer read from the database earlier still be used? (issue 11)
//!
//! Caches of what every tool call reads (verified bearer tokens in
//! [`crate::identity::bearer_cache`], a user's grants with a client's consents in
//! [`super::grant_cache`]) tag what they keep with a *generation* and use it only while the
//! generation has not moved. It moves:
//! - at once, after every write this process makes through the store ([`super::Db`] and the
//!   store's transactions call [`Freshness::written`] when the write has finished), so a change
//!   made through this server is seen by its very next request;
//! - when another process (another instance, the admin CLI, hand-written SQL) changed something
//!   a cache rests on: triggers move the `auth_epoch` counter (migrations 0012 and 0015) and a
//!   background task here reads that one row every [`POLL_EVERY`]; a moved counter moves the
//!   generation. Such a change is therefore seen within one poll interval plus one read.
//!
//! Without a watcher (admin commands, a watcher that stopped or cannot read the database)
//! [`Freshness::generation`] is `None` and callers go to the database as before: a cache is
//! used only while the last successful poll started less than [`TRUSTED_FOR`] ago.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::Store;

/// How often the counter other processes move is read.
pub const POLL_EVERY: Duration = Duration::from_millis(50);
/// Caches are trusted only while the watcher's last successful read started less than this
/// long ago: the upper bound on how late another process's change can be seen.
pub const TRUSTED_FOR: Duration = Duration::from_millis(500);

/// Shared by every clone of a [`Store`].
#[derive(Debug)]
pub struct Freshness {
    generation: AtomicU64,
    /// When the last successful poll started, in milliseconds after `origin` plus one
    /// (0: never).
    polled_at: AtomicU64,
    origin: Instant,
}

impl Default for Freshness {
    fn default() -> Self {
        Self { generation: AtomicU64::new(0), polled_at: AtomicU64::new(0), origin: Instant::now() }
    }
}

impl Freshness {
    /// Something was written: whatever was read before may be out of date.
    pub fn written(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The current generation, or `None` when other processes' changes are not being watched
    /// closely enough for anything cached to be trusted.
    pub fn generation(&self) -> Option<u64> {
        let polled = self.polled_at.load(Ordering::SeqCst);
        if polled == 0 {
            return None;
        }
        let age = self.millis_now().saturating_sub(polled - 1);
        if age > TRUSTED_FOR.as_millis() as u64 {
            return None;
        }
        Some(self.generation.load(Ordering::SeqCst))
    }

    fn millis_now(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }
}

impl Store {
    /// See [`Freshness::generation`].
    pub fn cache_generation(&self) -> Option<u64> {
        self.freshness.generation()
    }

    /// Reads the counter other processes move every [`POLL_EVERY`] until `shutdown`, moving the
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

    /// One read of the counter. Not counted in [`Store::queries_run`] (it is nobody's request)
    /// and bounded like every call.
    async fn poll_once(&self, last: &mut Option<i64>) {
        let started = self.freshness.millis_now() + 1;
        let read = sqlx::query_as::<_, (i64,)>("SELECT n FROM auth_epoch WHERE id = 1").fetch_one(self.pool());
        match tokio::time::timeout(self.timeouts.query, read).await {
            Ok(Ok((n,))) => {
                if *last != Some(n) {
                    self.freshness.written();
                    *last = Some(n);
                }
                self.freshness.polled_at.store(started, Ordering::SeqCst);
            }
            Ok(Err(error)) => tracing::warn!(%error, "could not read the access counter; caches are not used"),
            Err(_) => tracing::warn!("the access counter read timed out; caches are not used"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_trusted_before_the_first_poll_and_a_write_moves_the_generation() {
        let freshness = Freshness::default();
        assert_eq!(freshness.generation(), None);
        freshness.polled_at.store(freshness.millis_now() + 1, Ordering::SeqCst);
        let before = freshness.generation().unwrap();
        freshness.written();
        assert_eq!(freshness.generation(), Some(before + 1));
    }

    #[test]
    fn a_watcher_that_stopped_polling_is_not_trusted() {
        let freshness = Freshness { origin: Instant::now() - Duration::from_secs(10), ..Default::default() };
        freshness.polled_at.store(1, Ordering::SeqCst);
        assert_eq!(freshness.generation(), None);
    }
}
