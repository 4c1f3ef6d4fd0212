//! The store's side of the caches' generations ([`super::generations`]): what callers ask of
//! them, and the watcher that reads what other processes moved every [`POLL_EVERY`].

use std::sync::atomic::Ordering;

use tokio_util::sync::CancellationToken;

use crate::store::machinery::generations::POLL_EVERY;
use crate::store::machinery::store::Store;

impl Store {
    /// See [`super::generations::Generations::tick`].
    pub fn cache_tick(&self) -> Option<u64> {
        self.generations.tick()
    }

    /// See [`super::generations::Generations::generation`].
    pub fn cache_generation(&self, user_id: &str) -> Option<u64> {
        self.generations.generation(user_id)
    }

    /// See [`super::generations::Generations::shared_generation`].
    pub fn cache_shared_generation(&self) -> Option<u64> {
        self.generations.shared_generation()
    }

    /// Successful reads of the other writers' counter since start, and how often a cache was
    /// asked while the last one was too old to trust; tests wait for the first and tell a
    /// late watcher on a loaded machine apart with the second.
    pub fn watcher_counts(&self) -> (u64, u64) {
        (self.generations.polls.load(Ordering::SeqCst), self.generations.lapses.load(Ordering::SeqCst))
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
        let started = self.generations.millis_now() + 1;
        let read = sqlx::query_as::<_, (i64,)>(
            "SELECT e.n - COALESCE((SELECT w.n FROM auth_epoch_writers w WHERE w.writer = $1), 0) \
             FROM auth_epoch e WHERE e.id = 1",
        )
        .bind(&*self.writer)
        .fetch_one(self.pool());
        match tokio::time::timeout(self.timeouts.query, read).await {
            Ok(Ok((others,))) => {
                if *last != Some(others) {
                    self.generations.move_everyone();
                    *last = Some(others);
                }
                self.generations.polled_at.store(started, Ordering::SeqCst);
                self.generations.polls.fetch_add(1, Ordering::SeqCst);
            }
            Ok(Err(error)) => tracing::warn!(%error, "could not read the access counter; caches are not used"),
            Err(_) => tracing::warn!("the access counter read timed out; caches are not used"),
        }
    }
}
