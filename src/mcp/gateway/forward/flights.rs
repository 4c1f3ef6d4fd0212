//! A forwarded request in flight ([`InFlight`]: a tool call, a `prompts/get`, a
//! `resources/read`), and the table where one waits for a 2026-07-28 client's retry
//! ([`Flights`]) when its 2025-11-25 server asks a question mid-request.
//!
//! [`super::in_flight`] waits on one upstream request: its answer, the server's questions on its
//! stream ([`super::questions`]), the call timeout (not counting the user's time), the client's
//! cancellation. A 2025-11-25 session is asked each question as a nested request; a 2026-07-28
//! client takes no request of the broker's mid-request, so:
//!
//! - the broker answers the client's request with an `InputRequiredResult` of its own carrying
//!   the question, worded as [`super::questions`] words it (naming the server; a URL only when
//!   [`super::questions::checked_url`] passes it), and a sealed `requestState` bound to the user,
//!   client, method, name (tool, prompt or URI) and arguments
//!   ([`crate::mcp::input_required::FlightRound`]) that names a *flight*;
//! - the upstream request keeps running on this instance, parked in [`Flights`]: a bounded
//!   in-memory table keyed by a random id, each flight owned by its user and its server;
//! - the client's retry hands its response to the waiting server request (accept, decline or
//!   cancel, as an `ElicitResult`; a retry without one is a cancel) and waits on the same
//!   request again: its result is the retry's answer, a further question another round;
//! - a retry that reaches another instance is passed on to the one whose call waits
//!   ([`super::flight_home`], [`super::retry_forward`]); one that comes after
//!   `[gateway] question_wait`, or whose instance is gone or has no address for the others,
//!   gets an `isError` ([`question_expired`]) saying to send the request again — never a wait,
//!   never another user's flight;
//! - a flight whose client never retries: at `question_wait` the server's question is answered
//!   `cancel` and the request's eventual result dropped (cancelled upstream if it does not end
//!   within what is left of its timeout).
//!
//! A URL question has no completion notification in 2026-07-28: the retry itself is the answer.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::model::{CallToolResult, ElicitResult, ElicitationAction, ErrorData, ProgressToken, ServerResult};
use rmcp::service::ServiceError;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::failure::CancelUpstream;
use crate::mcp::gateway::upstream::client::LogRouteGuard;
use crate::mcp::gateway::upstream::pool::Upstream;
use crate::mcp::gateway::upstream::questions::{CallRoute, Question};
use crate::mcp::results::error_result;

/// The `inputRequests` key a server's mid-call question is asked under.
pub const FLIGHT_KEY: &str = "server_question";

/// At most this many questions wait per instance; a server asking beyond it is refused.
pub const MAX_FLIGHTS: usize = 1000;

type Response = Pin<Box<dyn Future<Output = Result<ServerResult, ServiceError>> + Send>>;

/// Where the user's answer to a server's question goes.
pub(crate) type Answer = oneshot::Sender<Result<ElicitResult, ErrorData>>;

/// One upstream request, waited on by [`super::in_flight::fly`] or parked in [`Flights`].
pub struct InFlight {
    pub(crate) connection: Arc<Upstream>,
    pub(crate) response: Response,
    pub(crate) asked: mpsc::Receiver<Question>,
    _route: CallRoute,
    pub(crate) cancel: CancelUpstream,
    /// The progress token rmcp gave the upstream call.
    pub(crate) progress: ProgressToken,
    /// What is left of `[gateway] call_timeout` for the server.
    pub(crate) remaining: Duration,
    /// The log route made before the request was sent ([`super::in_flight::send_upstream`]), taken
    /// by the first wait on it.
    pub(crate) logs: Option<LogRouteGuard>,
}

impl InFlight {
    pub(crate) fn new(
        connection: Arc<Upstream>,
        handle: rmcp::service::RequestHandle<rmcp::RoleClient>,
        limit: Duration,
    ) -> Self {
        let questions = connection.service.service().questions.clone();
        let (route, asked) = questions.route_call(handle.id.clone());
        let cancel = CancelUpstream::new(connection.service.peer().clone(), handle.id.clone());
        let progress = handle.progress_token.clone();
        Self {
            connection,
            response: Box::pin(handle.await_response()),
            asked,
            _route: route,
            cancel,
            progress,
            remaining: limit,
            logs: None,
        }
    }
}

/// A flight waiting for its client's retry: the call and where the user's answer goes.
pub(crate) type Parked = (InFlight, Answer);

/// This instance's flights, by id.
pub struct Flights {
    pub(crate) parking: Parking<Parked>,
    wait: Duration,
}

impl Flights {
    pub fn new(wait: Duration, max: usize) -> Arc<Self> {
        Arc::new(Self { parking: Parking::new(max), wait })
    }

    /// How many questions wait now.
    pub fn len(&self) -> usize {
        self.parking.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parks `call` for `owner`'s retry to the server `server_id` until the retry or
    /// `question_wait`; its id, or everything back when the table is full.
    pub(crate) fn park(
        self: &Arc<Self>,
        owner: &str,
        server_id: &str,
        call: InFlight,
        answer: Answer,
    ) -> Result<String, Box<Parked>> {
        let id = self.parking.park(owner, server_id, (call, answer)).map_err(Box::new)?;
        let (flights, expiring, wait) = (Arc::downgrade(self), id.clone(), self.wait);
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            expire(flights, &expiring).await;
        });
        Ok(id)
    }
}

/// Values parked by id, each for one owner's retry to one server: who may take what. Kept apart
/// from the calls themselves so the rule is tested on its own.
pub(crate) struct Parking<T> {
    table: Mutex<HashMap<String, Held<T>>>,
    max: usize,
}

struct Held<T> {
    owner: String,
    server_id: String,
    value: T,
}

impl<T> Parking<T> {
    fn new(max: usize) -> Self {
        Self { table: Mutex::default(), max }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held<T>>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn len(&self) -> usize {
        self.table().len()
    }

    /// A new random id for `value`, or `value` back when `max` wait already.
    fn park(&self, owner: &str, server_id: &str, value: T) -> Result<String, T> {
        let id = crate::crypto::random_token(16);
        let mut table = self.table();
        if table.len() >= self.max {
            return Err(value);
        }
        table.insert(id.clone(), Held { owner: owner.to_owned(), server_id: server_id.to_owned(), value });
        Ok(id)
    }

    /// The value `id`, if it is here and was parked for `owner` and `server_id`. Anyone else's
    /// attempt leaves it in place for its owner.
    pub(crate) fn take(&self, id: &str, owner: &str, server_id: &str) -> Option<T> {
        let mut table = self.table();
        let held = table.get(id)?;
        if held.owner != owner || held.server_id != server_id {
            return None;
        }
        table.remove(id).map(|held| held.value)
    }

    /// The value `id`, whoever it was parked for (its time is up).
    fn remove(&self, id: &str) -> Option<T> {
        self.table().remove(id).map(|held| held.value)
    }
}

/// `question_wait` is over and no retry took the flight: the server hears `cancel`, and what
/// it answers after is dropped.
async fn expire(flights: Weak<Flights>, id: &str) {
    let Some((mut call, answer)) = flights.upgrade().and_then(|flights| flights.parking.remove(id)) else { return };
    let _ = answer.send(Ok(ElicitResult::new(ElicitationAction::Cancel)));
    let deadline = tokio::time::Instant::now() + call.remaining;
    loop {
        tokio::select! {
            _ = &mut call.response => {
                call.cancel.answered();
                return;
            }
            Some(question) = call.asked.recv() => {
                let _ = question.answer.send(Ok(ElicitResult::new(ElicitationAction::Cancel)));
            }
            // Dropped: the call is cancelled upstream.
            _ = tokio::time::sleep_until(deadline) => return,
        }
    }
}

/// The answer to a retry whose flight is not here (expired, or on an instance that is gone or
/// cannot be reached). `again`
/// says what the client should do: "call the tool again", "send the request again".
pub fn question_expired(server: &str, again: &str) -> CallToolResult {
    let mut result = error_result(format!(
        "The question the server {server} asked is no longer waiting (it expired, or the broker instance it waited on is gone); {again}."
    ));
    result.structured_content = Some(json!({"error": "question_expired", "server": server}));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flight_is_taken_only_by_its_own_users_retry_to_its_own_server_and_only_once() {
        let parking = Parking::new(10);
        let id = parking.park("alice", "server-1", "alice's call").unwrap();
        assert_eq!(parking.take(&id, "bob", "server-1"), None, "another user");
        assert_eq!(parking.take(&id, "alice", "server-2"), None, "another server");
        assert_eq!(parking.take("no-such-flight", "alice", "server-1"), None);
        assert_eq!(parking.len(), 1, "a refused attempt leaves the flight for its owner");
        assert_eq!(parking.take(&id, "alice", "server-1"), Some("alice's call"));
        assert_eq!(parking.take(&id, "alice", "server-1"), None, "taken once");
        assert_eq!(parking.len(), 0);
    }

    #[test]
    fn a_full_table_gives_the_call_back_and_an_expired_flight_is_gone_for_everyone() {
        let parking = Parking::new(2);
        let first = parking.park("alice", "s", 1).unwrap();
        let second = parking.park("bob", "s", 2).unwrap();
        assert_ne!(first, second);
        assert_eq!(parking.park("carol", "s", 3), Err(3));
        assert_eq!(parking.remove(&first), Some(1));
        assert_eq!(parking.take(&first, "alice", "s"), None, "its time was up");
        assert!(parking.park("carol", "s", 3).is_ok(), "room again");
        assert_eq!(parking.take(&second, "bob", "s"), Some(2));
    }

    #[test]
    fn an_expired_question_says_to_call_again_and_names_the_server() {
        let result = question_expired("crm", "call the tool again");
        assert_eq!(result.is_error, Some(true));
        assert_eq!(result.structured_content, Some(json!({"error": "question_expired", "server": "crm"})));
        let text = serde_json::to_string(&result.content).unwrap();
        assert!(text.contains("call the tool again") && text.contains("crm"), "{text}");
    }
}
