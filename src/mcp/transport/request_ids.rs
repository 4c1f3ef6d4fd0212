//! The ids of the server's requests to the client, unique for the whole session.
//!
//! MCP basic §Requests: a requestor must not reuse an id within a session. A parked session
//! ([`super::session_transport`]) comes back with a new rmcp service, whose id counter starts
//! at 0 again, so the ids its requests carry are not the ones the client sees: each
//! request the server sends gets the session's next id, and the client's answer is mapped back
//! to the id its service gave it. An answer to a request of a service that has stopped since
//! (or to no request of ours) reaches no service: a new one could otherwise take it for the
//! answer to its own request of the same raw id.

use std::collections::HashMap;

use rmcp::model::{NumberOrString, RequestId};

/// Which of a session's services (the first one, then one per revival) sent a request.
pub type Generation = u64;

/// The server's requests still waiting for the client's answer, by the id the client saw.
#[derive(Debug, Default)]
pub struct ServerRequestIds {
    next: i64,
    waiting: HashMap<RequestId, (Generation, RequestId)>,
}

impl ServerRequestIds {
    /// A request service `generation` sends with its own `id`: the id the client sees.
    pub fn outgoing(&mut self, generation: Generation, id: RequestId) -> RequestId {
        let seen = NumberOrString::Number(self.next);
        self.next += 1;
        self.waiting.insert(seen.clone(), (generation, id));
        seen
    }

    /// The client answered `seen`: the id service `current` knows it by, or `None` when the
    /// request was not sent by `current` (or never by us), and the answer goes nowhere.
    pub fn answered(&mut self, current: Generation, seen: &RequestId) -> Option<RequestId> {
        match self.waiting.remove(seen) {
            Some((generation, id)) if generation == current => Some(id),
            Some(_) => {
                tracing::debug!(id = %seen, "an answer to a request of a stopped service of this session; dropped");
                None
            }
            None => {
                tracing::debug!(id = %seen, "an answer to no request of this session; dropped");
                None
            }
        }
    }

    /// The id the client saw for request `id` of service `generation` (a cancellation the
    /// server sends names it), if it still waits.
    pub fn seen_as(&self, generation: Generation, id: &RequestId) -> Option<RequestId> {
        self.waiting.iter().find(|(_, (g, own))| *g == generation && own == id).map(|(seen, _)| seen.clone())
    }

    /// Forgets what `generation` still waited for (its service stopped).
    pub fn forget(&mut self, generation: Generation) {
        self.waiting.retain(|_, (g, _)| *g != generation);
    }

    /// Whether the server waits for no answer.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(id: i64) -> RequestId {
        NumberOrString::Number(id)
    }

    #[test]
    fn ids_never_repeat_across_services_and_answers_go_back_under_the_services_own_id() {
        let mut ids = ServerRequestIds::default();
        // The first service asks twice (its ids 0 and 1), then a revived one starts at 0 again.
        let first = ids.outgoing(0, n(0));
        let second = ids.outgoing(0, n(1));
        assert_eq!(ids.answered(0, &first), Some(n(0)));
        assert_eq!(ids.answered(0, &second), Some(n(1)));
        assert!(ids.is_empty());
        let revived = ids.outgoing(1, n(0));

        assert_ne!(revived, first, "the client never sees an id twice");
        assert_ne!(revived, second);
        assert_eq!(ids.answered(1, &revived), Some(n(0)), "the revived service gets its own id back");
    }

    #[test]
    fn an_answer_to_a_stopped_services_request_reaches_no_service() {
        let mut ids = ServerRequestIds::default();
        let old = ids.outgoing(0, n(0));
        let new = ids.outgoing(1, n(0));
        assert_eq!(ids.answered(1, &old), None, "not the new service's request 0");
        assert_eq!(ids.answered(1, &n(99)), None, "never ours");
        assert_eq!(ids.answered(1, &new), Some(n(0)));
    }

    #[test]
    fn a_stopped_services_requests_are_forgotten_and_cancellations_name_the_seen_id() {
        let mut ids = ServerRequestIds::default();
        let old = ids.outgoing(0, n(5));
        let new = ids.outgoing(1, n(5));
        assert_eq!(ids.seen_as(1, &n(5)), Some(new.clone()));
        ids.forget(0);
        assert_eq!(ids.seen_as(0, &n(5)), None);
        assert_eq!(ids.answered(1, &old), None);
        assert!(!ids.is_empty());
        assert_eq!(ids.answered(1, &new), Some(n(5)));
        assert!(ids.is_empty());
    }
}
