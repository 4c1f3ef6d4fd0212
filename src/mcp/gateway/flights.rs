//! A forwarded tool call in flight, and a 2025-11-25 server's question asked mid-call of a
//! 2026-07-28 client (issue 26, "The server's own questions reach the user").
//!
//! [`BrokerServer::fly`] waits on one upstream call: its answer, the server's questions on its
//! stream ([`super::relay`]), the call timeout (not counting the user's time), the client's
//! cancellation. A 2025-11-25 session is asked each question as a nested request; a 2026-07-28
//! client takes no request of the broker's mid-call, so:
//!
//! - the broker answers the client's call with an `InputRequiredResult` of its own carrying the
//!   question, worded as [`super::relay`] words it (naming the server; a URL only when
//!   [`super::relay::checked_url`] passes it), and a sealed `requestState` bound to the user,
//!   client, tool and arguments ([`crate::mcp::input_required::FlightRound`]) that names a
//!   *flight*;
//! - the upstream call keeps running on this instance, parked in [`Flights`]: a bounded
//!   in-memory table keyed by a random id, each flight owned by its user;
//! - the client's retry hands its response to the waiting server request (accept, decline or
//!   cancel, as an `ElicitResult`; a retry without one is a cancel) and waits on the same call
//!   again: its result is the retry's answer, a further question another round;
//! - a retry that reaches another instance, or comes after `[gateway] question_wait`, gets an
//!   `isError` ([`question_expired`]) saying to call the tool again — never a wait, never
//!   another user's flight;
//! - a flight whose client never retries: at `question_wait` the server's question is answered
//!   `cancel` and the call's eventual result dropped (the call cancelled upstream if it does
//!   not end within what is left of its timeout).
//!
//! A URL question has no completion notification in 2026-07-28: the retry itself is the answer.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolResponse, CallToolResult, ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData, ProgressToken,
    ServerResult,
};
use rmcp::service::{RequestContext, ServiceError};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::Gateway;
use super::plain::{CancelUpstream, Failure};
use super::pool::{Connection, ConnectionKey};
use super::registry::ServerEntry;
use super::relay::{CallRoute, Question, checked_url, form_message, refused, url_message};
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

/// One upstream tool call, waited on by [`BrokerServer::fly`] or parked in [`Flights`].
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
        }
    }
}

/// A flight waiting for its client's retry.
struct Parked {
    owner: String,
    call: InFlight,
    answer: Answer,
}

/// This instance's flights, by id.
pub struct Flights {
    table: Mutex<HashMap<String, Parked>>,
    wait: Duration,
    max: usize,
}

impl Flights {
    pub fn new(wait: Duration, max: usize) -> Arc<Self> {
        Arc::new(Self { table: Mutex::default(), wait, max })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Parked>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many questions wait now.
    pub fn len(&self) -> usize {
        self.table().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parks `call` for `owner` until the retry or `question_wait`; its id, or everything back
    /// when the table is full.
    fn park(self: &Arc<Self>, owner: &str, call: InFlight, answer: Answer) -> Result<String, Box<(InFlight, Answer)>> {
        let id = crate::crypto::random_token(16);
        {
            let mut table = self.table();
            if table.len() >= self.max {
                return Err(Box::new((call, answer)));
            }
            table.insert(id.clone(), Parked { owner: owner.to_owned(), call, answer });
        }
        let (flights, expiring, wait) = (Arc::downgrade(self), id.clone(), self.wait);
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            expire(flights, &expiring).await;
        });
        Ok(id)
    }

    /// The flight `id`, if it is here and `owner`'s.
    fn take(&self, id: &str, owner: &str) -> Option<Parked> {
        let mut table = self.table();
        if table.get(id)?.owner != owner {
            return None;
        }
        table.remove(id)
    }
}

/// `question_wait` is over and no retry took the flight: the server hears `cancel`, and what
/// it answers after is dropped.
async fn expire(flights: Weak<Flights>, id: &str) {
    let Some(parked) = flights.upgrade().and_then(|flights| flights.table().remove(id)) else { return };
    let _ = parked.answer.send(Ok(ElicitResult::new(ElicitationAction::Cancel)));
    let mut call = parked.call;
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

/// The answer to a retry whose flight is not here (expired, or on another instance).
pub fn question_expired(server: &str) -> CallToolResult {
    let mut result = error_result(format!(
        "The question the server {server} asked is no longer waiting (it expired, or the retry reached another instance of the broker); call the tool again."
    ));
    result.structured_content = Some(json!({"error": "question_expired", "server": server}));
    result
}

/// A server's question as a 2026-07-28 client is shown it, or the refusal the server gets
/// (the same words as for a 2025-11-25 client, [`BrokerServer::relay_question`]).
fn for_client(server: &str, caller: &Caller, params: ElicitRequestParams) -> Result<ElicitRequestParams, ErrorData> {
    match params {
        ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } => {
            if !caller.form_mode {
                return Err(refused(format!(
                    "the user's client did not declare form elicitation; the broker cannot ask it for {server}"
                )));
            }
            Ok(ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: form_message(server, &message),
                requested_schema,
            })
        }
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
            if !caller.url_mode {
                return Err(refused(format!(
                    "the user's client did not declare URL elicitation; the broker cannot ask it for {server}"
                )));
            }
            let checked =
                checked_url(&url).map_err(|why| refused(format!("the broker did not relay the URL: {why}")))?;
            // 2026-07-28 has no elicitationId: the server's is never shown, and the retry
            // answers it.
            Ok(ElicitRequestParams::UrlElicitationParams {
                meta: None,
                message: url_message(server, &message, &checked),
                url,
                elicitation_id: String::new(),
            })
        }
        _ => Err(refused("an elicitation mode the broker does not relay".into())),
    }
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
    /// answer first (the call parked as a flight).
    pub(super) async fn fly(
        &self,
        gateway: &Arc<Gateway>,
        entry: &Arc<ServerEntry>,
        key: &ConnectionKey,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
        mut call: InFlight,
    ) -> Result<CallToolResponse, Failure> {
        let server = entry.row.name.as_str();
        // What the server reports goes to this client call under its own token, if it gave one.
        let _progress = ctx.meta.get_progress_token().map(|token| {
            call.connection.service.service().route_progress(call.progress.clone(), ctx.peer.clone(), token)
        });
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
                    return self.call_answer(gateway, entry, key, &call.connection, answer);
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
                return Ok(super::relay::unaskable_result(server, &question.params).into());
            };
            let shown = match for_client(server, caller, question.params) {
                Ok(shown) => shown,
                Err(error) => {
                    let _ = question.answer.send(Err(error));
                    continue;
                }
            };
            match gateway.flights.park(&caller.user.user_id, call, question.answer) {
                Ok(id) => {
                    let flight = FlightRound { server_id: entry.row.id.clone(), flight: id, key: FLIGHT_KEY.into() };
                    return Err(Failure::Asked(Box::new(round.ask_for_flight(shown, flight))));
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

    /// A 2026-07-28 client's retry after a server's mid-call question: the answer to the
    /// waiting server request, then the same call waited on again.
    pub(super) async fn resume_flight(
        &self,
        gateway: &Arc<Gateway>,
        entry: &Arc<ServerEntry>,
        key: &ConnectionKey,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Failure> {
        let server = entry.row.name.as_str();
        let Some((flight, answer)) = caller.round.as_ref().and_then(|round| round.flight()) else {
            return Ok(question_expired(server).into());
        };
        let parked =
            gateway.flights.take(&flight.flight, &caller.user.user_id).filter(|_| flight.server_id == entry.row.id);
        let Some(parked) = parked else { return Ok(question_expired(server).into()) };
        let answer = answer.cloned().unwrap_or_else(|| ElicitResult::new(ElicitationAction::Cancel));
        if parked.answer.send(Ok(answer)).is_err() {
            // The server stopped asking (its request was cancelled): its answer is still to come.
            tracing::debug!(server = %entry.row.name, "a server's question ended before the user's answer arrived");
        }
        self.fly(gateway, entry, key, caller, ctx, parked.call).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expired_question_says_to_call_again_and_names_the_server() {
        let result = question_expired("crm");
        assert_eq!(result.is_error, Some(true));
        assert_eq!(result.structured_content, Some(json!({"error": "question_expired", "server": "crm"})));
        let text = serde_json::to_string(&result.content).unwrap();
        assert!(text.contains("call the tool again") && text.contains("crm"), "{text}");
    }
}
