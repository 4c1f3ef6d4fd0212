//! A server's state for its users' own resources lists
//! ([`crate::mcp::gateway::forward::own_resources`]), kept in its entry ([`super::registry`]):
//! which users' lists leave it out after it did not answer them, and whether a change it
//! announced is about to be passed on.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// How long announced changes are gathered into one signal.
pub const GATHER: Duration = Duration::from_millis(200);

/// How long a user's lists leave out a server that did not answer them or could not be reached.
pub const PAUSE: Duration = Duration::from_secs(30);

#[derive(Default)]
pub(crate) struct OwnListing {
    /// User id → until when that user's lists leave the server out. Per user: one user's slow
    /// list or refused credential says nothing of the server for the others.
    paused_until: Mutex<HashMap<String, Instant>>,
    /// A change is gathered and about to be signalled.
    pub(crate) change_pending: AtomicBool,
}

impl OwnListing {
    fn paused_until(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.paused_until.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `user`'s lists leave the server out at `now`.
    pub(crate) fn paused(&self, user: &str, now: Instant) -> bool {
        self.paused_until().get(user).is_some_and(|until| now < *until)
    }

    /// The server did not answer `user` at `now`: their lists leave it out for [`PAUSE`]. Ended
    /// pauses are forgotten here, so the map holds only users paused now.
    pub(crate) fn pause(&self, user: &str, now: Instant) {
        let mut paused = self.paused_until();
        paused.retain(|_, until| now < *until);
        paused.insert(user.to_owned(), now + PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_did_not_answer_a_user_is_left_out_of_their_lists_for_the_pause_only() {
        let listing = OwnListing::default();
        let failed = Instant::now();
        assert!(!listing.paused("alice", failed), "asked until it fails");
        listing.pause("alice", failed);
        assert!(listing.paused("alice", failed));
        assert!(!listing.paused("bob", failed), "another user's lists still ask it");
        assert!(listing.paused("alice", failed + PAUSE - Duration::from_millis(1)), "for the whole pause");
        assert!(!listing.paused("alice", failed + PAUSE), "then asked again");
        // An ended pause is forgotten when another begins.
        listing.pause("bob", failed + PAUSE);
        assert_eq!(listing.paused_until().len(), 1);
    }
}
