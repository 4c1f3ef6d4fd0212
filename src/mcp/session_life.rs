//! When an MCP session may end for being idle.
//!
//! rmcp ends a session after 5 minutes without a message, even while the client listens on
//! an open GET stream — and connect links live 10 minutes, so a user who approved after 5
//! minutes never got the completion notification. Here a session is idle only when nothing
//! is open: no stream (a listening GET or a request still running), no authorization it
//! started still waiting for the user, and no request for [`IDLE_SECONDS`]. Idle sessions are
//! then closed ([`crate::mcp::session_manager`]), which returns their memory.
//!
//! Time comes from the injected clock, so tests move it instead of waiting.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::clock::{SharedClock, Timestamp};

/// A session with nothing open ends after this long without a request, unless the operator
/// set `mcp_session_idle` ([`crate::config::Config::mcp_session_idle`]).
pub const IDLE_SECONDS: i64 = crate::config::MCP_SESSION_IDLE.as_secs() as i64;

pub struct SessionLife {
    clock: SharedClock,
    sessions: Mutex<HashMap<String, Life>>,
}

#[derive(Debug, Clone, Copy)]
struct Life {
    last_active: Timestamp,
    open_streams: usize,
    /// An authorization this session started waits for the user until then.
    pending_until: Timestamp,
}

impl SessionLife {
    pub fn new(clock: SharedClock) -> Self {
        Self { clock, sessions: Mutex::default() }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Life>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// A request on the session (or its creation).
    pub fn touch(&self, session: &str) {
        let now = self.now();
        let mut sessions = self.sessions();
        // Every request touches its session: the id is copied only the first time.
        match sessions.get_mut(session) {
            Some(life) => life.last_active = now,
            None => {
                sessions.insert(session.to_owned(), Life { last_active: now, open_streams: 0, pending_until: 0 });
            }
        }
    }

    /// The session keeps living at least until `until` (an authorization it started waits).
    pub fn pending_until(&self, session: &str, until: Timestamp) {
        if let Some(life) = self.sessions().get_mut(session) {
            life.pending_until = life.pending_until.max(until);
        }
    }

    /// A stream opens on the session; it counts as open until the guard drops.
    pub fn stream_opened(self: &Arc<Self>, session: &str) -> StreamGuard {
        self.touch(session);
        if let Some(life) = self.sessions().get_mut(session) {
            life.open_streams += 1;
        }
        StreamGuard { life: self.clone(), session: session.to_owned() }
    }

    pub fn ended(&self, session: &str) {
        let mut sessions = self.sessions();
        sessions.remove(session);
        super::shrink::map(&mut sessions);
    }

    /// Sessions with nothing open and no request for `idle_seconds`.
    pub fn idle(&self, idle_seconds: i64) -> Vec<String> {
        let now = self.now();
        self.sessions()
            .iter()
            .filter(|(_, l)| l.open_streams == 0 && l.pending_until <= now && now - l.last_active >= idle_seconds)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Sessions tracked (for tests of memory).
    pub fn len(&self) -> usize {
        self.sessions().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An open stream of a session; dropping it (the client went away, or the stream ended)
/// starts the idle time over.
pub struct StreamGuard {
    life: Arc<SessionLife>,
    session: String,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let now = self.life.now();
        if let Some(life) = self.life.sessions().get_mut(&self.session) {
            life.open_streams = life.open_streams.saturating_sub(1);
            life.last_active = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn life() -> (Arc<SessionLife>, ManualClock) {
        let clock = ManualClock::new(1_000);
        (Arc::new(SessionLife::new(Arc::new(clock.clone()))), clock)
    }

    #[test]
    fn a_session_without_anything_open_is_idle_after_the_timeout() {
        let (life, clock) = life();
        life.touch("s1");
        clock.advance(IDLE_SECONDS - 1);
        assert!(life.idle(IDLE_SECONDS).is_empty());
        clock.advance(1);
        assert_eq!(life.idle(IDLE_SECONDS), ["s1"]);
    }

    #[test]
    fn an_open_stream_keeps_a_session_and_closing_it_starts_the_idle_time_over() {
        let (life, clock) = life();
        let stream = life.stream_opened("s1");
        clock.advance(IDLE_SECONDS * 3);
        assert!(life.idle(IDLE_SECONDS).is_empty(), "listening is not idle");
        drop(stream);
        clock.advance(IDLE_SECONDS - 1);
        assert!(life.idle(IDLE_SECONDS).is_empty());
        clock.advance(1);
        assert_eq!(life.idle(IDLE_SECONDS), ["s1"]);
    }

    #[test]
    fn a_pending_authorization_keeps_a_session_until_its_link_expires() {
        let (life, clock) = life();
        life.touch("s1");
        life.pending_until("s1", 1_000 + 600);
        clock.advance(IDLE_SECONDS + 1);
        assert!(life.idle(IDLE_SECONDS).is_empty());
        clock.advance(600);
        assert_eq!(life.idle(IDLE_SECONDS), ["s1"]);
        life.ended("s1");
        assert!(life.is_empty());
    }
}
