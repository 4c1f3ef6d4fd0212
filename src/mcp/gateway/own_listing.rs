//! A server's state for its users' own resources lists ([`super::own_resources`]), kept in its
//! entry ([`super::registry`]): when lists leave it out after it did not answer, and whether a
//! change it announced is about to be passed on.

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// How long lists leave out a server that did not answer or could not be reached.
pub const PAUSE: Duration = Duration::from_secs(30);

#[derive(Default)]
pub(crate) struct OwnListing {
    paused_until: Mutex<Option<Instant>>,
    /// A change is gathered and about to be signalled.
    pub(super) change_pending: AtomicBool,
}

impl OwnListing {
    /// Whether lists leave the server out at `now`.
    pub(super) fn paused(&self, now: Instant) -> bool {
        let until = *self.paused_until.lock().unwrap_or_else(|p| p.into_inner());
        until.is_some_and(|until| now < until)
    }

    /// The server did not answer at `now`: lists leave it out for [`PAUSE`].
    pub(super) fn pause(&self, now: Instant) {
        *self.paused_until.lock().unwrap_or_else(|p| p.into_inner()) = Some(now + PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_did_not_answer_is_left_out_for_the_pause_then_asked_again() {
        let listing = OwnListing::default();
        let failed = Instant::now();
        assert!(!listing.paused(failed), "asked until it fails");
        listing.pause(failed);
        assert!(listing.paused(failed));
        assert!(listing.paused(failed + PAUSE - Duration::from_millis(1)), "for the whole pause");
        assert!(!listing.paused(failed + PAUSE), "then asked again");
    }
}
