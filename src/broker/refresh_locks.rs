//! The in-process half of "one refresh per grant at a time" (the database lease is the other),
//! and what this process must not forget about refreshes:
//! - one async mutex per grant id;
//! - this process's holder id for leases (random per run);
//! - rotated tokens the provider issued that could not be stored yet (sealed), so the next
//!   attempt stores them before it calls the provider again;
//! - how many refreshes are running, so shutdown can wait for them ([`RefreshLocks::wait_idle`]).
//!
//! Its own file so the state that holds it imports nothing else of the core.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::store::grants::SealedTokens;

/// Tokens a refresh brought that are not in the database yet.
#[derive(Debug, Clone)]
pub(crate) struct PendingRotation {
    /// The sealed refresh token that was redeemed: the stored one these tokens replace.
    pub redeemed: Vec<u8>,
    /// The new tokens, sealed for the grant's row.
    pub tokens: SealedTokens,
    /// When the provider issued them.
    pub issued_at: i64,
}

/// One async mutex per grant id, plus this process's memory of unfinished refreshes.
#[derive(Debug)]
pub struct RefreshLocks {
    holder: String,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    pending: Mutex<HashMap<String, PendingRotation>>,
    running: tokio::sync::watch::Sender<usize>,
}

impl Default for RefreshLocks {
    fn default() -> Self {
        Self {
            holder: format!("i_{}", uuid::Uuid::new_v4().simple()),
            locks: Mutex::default(),
            pending: Mutex::default(),
            running: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl RefreshLocks {
    pub(crate) fn lock_for(&self, grant_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.locks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        map.entry(grant_id.to_owned()).or_default().clone()
    }

    /// This process's name on the leases it holds.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    pub(crate) fn keep_pending(&self, grant_id: &str, pending: PendingRotation) {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).insert(grant_id.to_owned(), pending);
    }

    pub(crate) fn pending(&self, grant_id: &str) -> Option<PendingRotation> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).get(grant_id).cloned()
    }

    pub(crate) fn forget_pending(&self, grant_id: &str) {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(grant_id);
    }

    /// How many grants have rotated tokens this process could not store yet.
    pub fn pending_count(&self) -> usize {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Counts a refresh as running until the returned guard is dropped.
    pub(crate) fn start(self: &Arc<Self>) -> Running {
        self.running.send_modify(|n| *n += 1);
        Running(self.clone())
    }

    /// How many refreshes are running in this process now.
    pub fn running_count(&self) -> usize {
        *self.running.borrow()
    }

    /// Resolves once no refresh is running in this process: the shutdown path awaits it (under
    /// its grace period) before exiting, so a refresh whose request reached the provider can
    /// store the rotated token it brings. Refreshes run detached from their callers
    /// ([`crate::broker::refresh`]), so ending the requests does not end them.
    pub async fn wait_idle(&self) {
        let mut running = self.running.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = running.wait_for(|n| *n == 0).await;
    }
}

/// A running refresh (see [`RefreshLocks::start`]).
pub(crate) struct Running(Arc<RefreshLocks>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.send_modify(|n| *n = n.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wait_idle_resolves_when_the_last_refresh_ends() {
        let locks = Arc::new(RefreshLocks::default());
        locks.wait_idle().await;
        let first = locks.start();
        let second = locks.start();
        let waiter = tokio::spawn({
            let locks = locks.clone();
            async move { locks.wait_idle().await }
        });
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "one refresh still runs");
        drop(second);
        waiter.await.unwrap();
    }

    #[test]
    fn each_process_has_its_own_holder_id() {
        assert_ne!(RefreshLocks::default().holder(), RefreshLocks::default().holder());
    }
}
