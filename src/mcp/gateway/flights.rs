//! A forwarded request in flight — a tool call, a `prompts/get`, a `resources/read` — and a
//! 2025-11-25 server's question asked mid-request of a 2026-07-28 client.
//!
//! [`BrokerServer::fly`] waits on one upstream request: its answer, the server's questions on its
//! stream ([`super::relay`]), the call timeout (not counting the user's time), the client's
//! cancellation. A 2025-11-25 session is asked each question as a nested request; a 2026-07-28
//! client takes no request of the broker's mid-request, so:
//!
//! - the broker answers the client's request with an `InputRequiredResult` of its own carrying
//!   the question, worded as [`super::relay`] words it (naming the server; a URL only when
//!   [`super::relay::checked_url`] passes it), and a sealed `requestState` bound to the user,
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

use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ElicitResult, ElicitationAction, ErrorData, ProgressToken, ServerResult};
use rmcp::service::{RequestContext, ServiceError};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::Gateway;
use super::client::LogRouteGuard;
use super::plain::{CancelUpstream, Failure};
use super::pool::Connection;
use super::registry::ServerEntry;
use super::relay::{CallRoute, Question, shown_question};
use crate::mcp::handler::{BrokerServer, Caller};
use crate::mcp::input_required::FlightRound;
use crate::mcp::results::error_result;

/// The `inputRequests` key a server's mid-call question is asked under.
pub const FLIGHT_KEY: &str = "server_question";

/// At most this many questions wait per instance; a server asking beyond it is refused.
pub const MAX_FLIGHTS: usize = 1000;

type Response = Pin<Box<dyn Future<Output = Result<ServerResult, ServiceError>> + Send>>;

/// Where the user's answer to a server's question goes.
type Answer = oneshot::Sender<Result<ElicitResult, ErrorData>>;

/// One upstream request, waited on by [`BrokerServer::fly`] or parked in [`Flights`].
pub struct InFlight {
    pub(super) connection: Arc<Connection>,
    response: Response,
    asked: mpsc::Receiver<Question>,
    _route: CallRoute,
    cancel: CancelUpstream,
    /// The progress token rmcp gave the upstream call.
    progress: ProgressToken,
    /// What is left of `[gateway] call_timeout` for the server.
    remaining: Duration,
    /// The log route made before the request was sent ([`BrokerServer::send_upstream`]), taken
    /// by the first wait on it.
    logs: Option<LogRouteGuard>,
}

impl InFlight {
    pub(super) fn new(
        connection: Arc<Connection>,
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
type Parked = (InFlight, Answer);

/// This instance's flights, by id.
pub struct Flights {
    parking: Parking<Parked>,
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
    fn park(
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
struct Parking<T> {
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
    fn take(&self, id: &str, owner: &str, server_id: &str) -> Option<T> {
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

/// How a forwarded request ended: the server's answer (over `connection`, the one it was
/// sent on), or the broker's own in a tool's shape (a question that could not be asked, a
/// flight no longer here).
#[allow(clippy::large_enum_variant, reason = "returned once per forwarded request, never stored")]
pub(super) enum Landing {
    Answered { connection: Arc<Connection>, answer: Result<ServerResult, ServiceError> },
    Broker(CallToolResult),
}

/// What ended one wait on the call.
enum Next {
    Answer(Result<ServerResult, ServiceError>),
    Late,
    Asked(Question),
}

impl BrokerServer {
    /// Waits on `call` for the client of `ctx`: relays the server's questions in the client's
    /// era and returns the server's answer, or `Failure::Asked` when a 2026-07-28 client must
    /// answer first (the request parked as a flight).
    pub(super) async fn fly(
        &self,
        gateway: &Arc<Gateway>,
        entry: &Arc<ServerEntry>,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
        mut call: InFlight,
    ) -> Result<Landing, Failure> {
        let server = entry.row.name.as_str();
        // What the server reports goes to this client call under its own token, if it gave one.
        let _progress = ctx.meta.get_progress_token().map(|token| {
            call.connection.service.service().route_progress(call.progress.clone(), ctx.peer.clone(), token)
        });
        // And its log messages, at the level this client asked for (routed before the request
        // was sent; a resumed flight's go to the retry).
        let _logs = match call.logs.take() {
            Some(route) => route,
            None => self.log_route(&call.connection, ctx),
        };
        let questions = call.connection.service.service().questions.clone();
        loop {
            let started = tokio::time::Instant::now();
            let next = tokio::select! {
                _ = ctx.ct.cancelled() => return Err(Failure::Cancelled),
                answer = &mut call.response => Next::Answer(answer),
                _ = tokio::time::sleep(call.remaining) => Next::Late,
                Some(question) = call.asked.recv() => Next::Asked(question),
            };
            // The time the user takes to answer a question does not count against the call.
            call.remaining = call.remaining.saturating_sub(started.elapsed());
            let question = match next {
                Next::Answer(answer) => {
                    call.cancel.answered();
                    // The server's log messages sent before its answer reach the client first.
                    call.connection.service.service().logs_settled().await;
                    return Ok(Landing::Answered { connection: call.connection.clone(), answer });
                }
                Next::Late => {
                    tracing::warn!(server = %entry.row.name, "a call to a server behind the broker did not answer in time");
                    return Err(Failure::Unreachable);
                }
                Next::Asked(question) => question,
            };
            if !caller.round_trips {
                let reply = tokio::select! {
                    _ = ctx.ct.cancelled() => return Err(Failure::Cancelled),
                    reply = self.relay_question(entry, caller, ctx, &questions, question.params) => reply,
                };
                let _ = question.answer.send(reply);
                continue;
            }
            // MCP 2026-07-28: the question becomes a round of the broker's; the call waits here.
            let Some(round) = caller.round.as_ref() else {
                let _ = question.answer.send(Err(super::relay::unaskable_error(server)));
                return Ok(Landing::Broker(super::relay::unaskable_result(server, &question.params)));
            };
            // 2026-07-28 has no elicitationId: the server's is never shown, and the retry
            // answers it.
            let shown = match shown_question(server, caller, question.params, String::new()) {
                Ok((shown, _)) => shown,
                Err(why) => {
                    let _ = question.answer.send(Err(why.for_server(server)));
                    continue;
                }
            };
            match gateway.flights.park(&caller.user.user_id, &entry.row.id, call, question.answer) {
                Ok(id) => {
                    let flight = FlightRound { server_id: entry.row.id.clone(), flight: id, key: FLIGHT_KEY.into() };
                    // The home is good for as long as the flight waits (rounded up).
                    let until = self.state.app.core.now()
                        + self.state.app.core.config.gateway.question_wait.as_secs() as i64
                        + 1;
                    let home = gateway.home.tag(&self.state.app.core.sealer, &caller.user.user_id, until);
                    return Err(Failure::Asked(Box::new(round.ask_for_flight(shown, flight, home.as_deref()))));
                }
                Err(back) => {
                    let (back, answer) = *back;
                    tracing::warn!(server = %entry.row.name, "too many questions of servers behind the broker are waiting; one was refused");
                    let _ = answer.send(Err(ErrorData::internal_error(
                        "the broker has too many questions waiting for users; ask again later",
                        None,
                    )));
                    call = back;
                }
            }
        }
    }

    /// Sends `request` to the server over `connection` and returns it in flight, to be waited
    /// on by [`BrokerServer::fly`]. The client's log route is made before the request leaves,
    /// so a message the server sends at once finds it.
    pub(super) async fn send_upstream(
        &self,
        entry: &ServerEntry,
        connection: &Arc<Connection>,
        request: rmcp::model::ClientRequest,
        ctx: &RequestContext<RoleServer>,
        limit: Duration,
    ) -> Result<InFlight, ServiceError> {
        let wanted = crate::mcp::logging::LogWanted::of(ctx, &self.scope().log_level);
        let options = upstream_options(entry, &wanted);
        let logs = connection.service.service().route_logs(ctx.peer.clone(), ctx.id.clone(), wanted);
        let handle = connection.service.peer().send_request_with_option(request, options).await?;
        let mut call = InFlight::new(connection.clone(), handle, limit);
        call.logs = Some(logs);
        Ok(call)
    }

    /// The route of the server's log messages on `connection` to the client of `ctx`.
    fn log_route(&self, connection: &Connection, ctx: &RequestContext<RoleServer>) -> LogRouteGuard {
        let wanted = crate::mcp::logging::LogWanted::of(ctx, &self.scope().log_level);
        connection.service.service().route_logs(ctx.peer.clone(), ctx.id.clone(), wanted)
    }

    /// A 2026-07-28 client's retry after a server's mid-request question: the answer to the
    /// waiting server request, then the same request waited on again. `again` is what an
    /// expired flight's answer tells the client to do ([`question_expired`]).
    pub(super) async fn resume_flight(
        &self,
        gateway: &Arc<Gateway>,
        entry: &Arc<ServerEntry>,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
        again: &str,
    ) -> Result<Landing, Failure> {
        let server = entry.row.name.as_str();
        let Some((flight, answer)) = caller.round.as_ref().and_then(|round| round.flight()) else {
            return Ok(Landing::Broker(question_expired(server, again)));
        };
        // The state names the server it was asked for; a flight is only taken by its own user's
        // retry to that same server.
        let parked = (flight.server_id == entry.row.id)
            .then(|| gateway.flights.parking.take(&flight.flight, &caller.user.user_id, &entry.row.id))
            .flatten();
        let Some((call, waiting)) = parked else { return Ok(Landing::Broker(question_expired(server, again))) };
        let answer = answer.cloned().unwrap_or_else(|| ElicitResult::new(ElicitationAction::Cancel));
        if waiting.send(Ok(answer)).is_err() {
            // The server stopped asking (its request was cancelled): its answer is still to come.
            tracing::debug!(server = %entry.row.name, "a server's question ended before the user's answer arrived");
        }
        self.fly(gateway, entry, caller, ctx, call).await
    }
}

/// How a forwarded request is sent: to a server of the stateless 2026-07-28 revision, with the
/// log level its client wants in `_meta` (such a server logs only when a request asks; a
/// 2025-11-25 server's messages are filtered here, [`super::client`]).
fn upstream_options(entry: &ServerEntry, wanted: &crate::mcp::logging::LogWanted) -> rmcp::service::PeerRequestOptions {
    let mut options = rmcp::service::PeerRequestOptions::no_options();
    if entry.revision.get() != Some(super::revision::Revision::Stateless) {
        return options;
    }
    if let Some(level) = wanted.minimum() {
        let mut meta = rmcp::model::RequestMetaObject::new();
        meta.set_log_level(level);
        options.meta = Some(meta);
    }
    options
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
