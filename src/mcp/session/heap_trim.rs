//! Giving the memory of closed sessions back to the operating system.
//!
//! Each MCP session costs about 80 KiB while it is open, most of it rmcp's per-session tasks
//! and channels and hyper's connection buffers (docs/performance.md "Memory"). When sessions
//! close, all of it is freed, but glibc's allocator keeps freed memory in its arenas: measured with
//! 10,000 sessions opened and closed, the RSS stayed at its peak (~830 MB) until
//! `malloc_trim(0)` brought it back to ~77 MB. So once enough sessions have closed, the heap
//! is trimmed — not at every close: trimming walks every arena under its lock and hands pages
//! back that a busy server would fault in again at once.
//!
//! The trim runs [`TRIM_AFTER`] after the close that makes [`TRIM_EVERY_CLOSED`] (so a burst
//! of closes, a sweep or a client going away with many sessions, is done first), at most once
//! per [`TRIM_AT_MOST_EVERY`], on a blocking thread. Elsewhere than glibc it does nothing.
//!
//! The `oauth-broker` binary allocates with jemalloc (`src/main.rs`), which gives freed pages
//! back by itself about a second after their last use (`.cargo/config.toml`); the trim then
//! only returns what was allocated through glibc (SQLite's own allocations), and everything
//! when the library runs without jemalloc (the tests, an embedding program).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// Sessions closed since the last trim before another is worth it.
pub const TRIM_EVERY_CLOSED: usize = 64;
/// The trim runs once no session has closed for this long (a burst of closes is over)…
pub const TRIM_WHEN_QUIET: Duration = Duration::from_secs(1);
/// …or this long after it became worth it, while sessions keep closing.
pub const TRIM_WITHIN: Duration = Duration::from_secs(10);

#[derive(Default)]
pub struct HeapTrim {
    state: Mutex<State>,
}

/// When to trim: decided with the time passed in, so tests need no clock.
#[derive(Debug, Default)]
struct State {
    /// Sessions closed since the last trim started.
    closed: usize,
    /// The last close.
    last_close: Option<Instant>,
    /// When a trim became worth it; `None` while none is waiting.
    waiting_since: Option<Instant>,
}

impl State {
    /// A session closed at `now`; true if this close makes a trim worth waiting for.
    fn closed_at(&mut self, now: Instant) -> bool {
        self.closed += 1;
        self.last_close = Some(now);
        if self.closed < TRIM_EVERY_CLOSED || self.waiting_since.is_some() {
            return false;
        }
        self.waiting_since = Some(now);
        true
    }

    /// When the waiting trim is due (later closes push it back, up to [`TRIM_WITHIN`]).
    fn due(&self) -> Option<Instant> {
        let since = self.waiting_since?;
        let quiet = self.last_close.unwrap_or(since) + TRIM_WHEN_QUIET;
        Some(quiet.min(since + TRIM_WITHIN))
    }

    /// The trim starts; returns how many closes it follows.
    fn trimming(&mut self) -> usize {
        self.waiting_since = None;
        std::mem::take(&mut self.closed)
    }
}

impl HeapTrim {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A session was closed; trims once enough have been and the closing stops.
    pub fn session_closed(self: &Arc<Self>) {
        if !self.state().closed_at(Instant::now()) {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                let due = this.state().due();
                match due {
                    Some(due) if due > Instant::now() => tokio::time::sleep_until(due).await,
                    _ => break,
                }
            }
            let closed = this.state().trimming();
            let returned = tokio::task::spawn_blocking(trim).await.unwrap_or(false);
            tracing::debug!(closed, returned, "trimmed the heap after closed MCP sessions");
        });
    }
}

/// Returns free heap pages to the OS; true if any were.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() -> bool {
    // SAFETY: malloc_trim only reorganises the allocator's own free lists; it is thread-safe
    // (it takes each arena's lock) and has no precondition.
    unsafe { libc::malloc_trim(0) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_closed_sessions_do_not_trim_and_a_burst_trims_once_when_it_is_over() {
        let (mut state, t0) = (State::default(), Instant::now());
        for _ in 0..TRIM_EVERY_CLOSED - 1 {
            assert!(!state.closed_at(t0), "not worth a trim yet");
        }
        assert_eq!(state.due(), None);
        assert!(state.closed_at(t0), "now it is");
        let burst_end = t0 + Duration::from_millis(300);
        for _ in 0..TRIM_EVERY_CLOSED * 10 {
            assert!(!state.closed_at(burst_end), "one trim is already waiting");
        }
        assert_eq!(state.due(), Some(burst_end + TRIM_WHEN_QUIET), "the burst is over first");
        assert_eq!(state.trimming(), TRIM_EVERY_CLOSED * 11);
        assert_eq!(state.due(), None);
        assert!(!state.closed_at(burst_end), "the count starts over");
    }

    #[test]
    fn sessions_that_keep_closing_still_get_a_trim_within_the_bound() {
        let (mut state, t0) = (State::default(), Instant::now());
        for _ in 0..TRIM_EVERY_CLOSED {
            state.closed_at(t0);
        }
        let mut now = t0;
        while now < t0 + TRIM_WITHIN * 2 {
            now += TRIM_WHEN_QUIET / 2;
            state.closed_at(now);
        }
        assert_eq!(state.due(), Some(t0 + TRIM_WITHIN), "steady closing does not put it off for ever");
    }
}
