//! Waiting on one forwarded request in flight ([`fly`]): its progress routed to the client under
//! the client's own token, the server's log messages to the client request, the server's
//! questions relayed in the client's era ([`super::questions`]; a 2026-07-28 client's parked as
//! a flight, [`super::flights`]), the call timeout (not counting the user's time) and the
//! client's cancellation. A 2026-07-28 client's retry after such a question takes its flight
//! back and waits on the same request again ([`resume`]).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolResult, ClientRequest, ElicitResult, ElicitationAction, ErrorData, ServerResult};
use rmcp::service::{PeerRequestOptions, ServiceError};

use super::failure::Failure;
use super::flights::{FLIGHT_KEY, InFlight, question_expired};
use super::forwarded::Forward;
use super::questions::{relay_question, shown_question, unaskable_error, unaskable_result};
use crate::mcp::gateway::catalogue::registry::ServerEntry;
use crate::mcp::gateway::upstream::client::LogRouteGuard;
use crate::mcp::gateway::upstream::pool::Upstream;
use crate::mcp::gateway::upstream::questions::Question;
use crate::mcp::gateway::upstream::revision::Revision;
use crate::mcp::input_required::FlightRound;
use crate::mcp::logging::LogWanted;

/// How a forwarded request ended: the server's answer (over `connection`, the one it was
/// sent on), or the broker's own in a tool's shape (a question that could not be asked, a
/// flight no longer here).
#[allow(clippy::large_enum_variant, reason = "returned once per forwarded request, never stored")]
pub(crate) enum Landing {
    Answered { connection: Arc<Upstream>, answer: Result<ServerResult, ServiceError> },
    Broker(CallToolResult),
}

/// What ended one wait on the call.
enum Next {
    Answer(Result<ServerResult, ServiceError>),
    Late,
    Asked(Question),
}

/// Sends `request` to the server over `connection` and returns it in flight, to be waited on
/// by [`fly`]. The client's log route is made before the request leaves, so a message the
/// server sends at once finds it.
pub(crate) async fn send_upstream(
    forward: &Forward<'_>,
    connection: &Arc<Upstream>,
    request: ClientRequest,
    limit: Duration,
) -> Result<InFlight, ServiceError> {
    let cx = forward.cx;
    let wanted = LogWanted::of(cx.request, &cx.session.log_level);
    let options = upstream_options(forward.entry, &wanted);
    let logs = connection.service.service().route_logs(cx.request.peer.clone(), cx.request.id.clone(), wanted);
    let handle = connection.service.peer().send_request_with_option(request, options).await?;
    let mut call = InFlight::new(connection.clone(), handle, limit);
    call.logs = Some(logs);
    Ok(call)
}

/// The route of the server's log messages on `connection` to the client request of `forward`.
fn log_route(forward: &Forward<'_>, connection: &Upstream) -> LogRouteGuard {
    let cx = forward.cx;
    let wanted = LogWanted::of(cx.request, &cx.session.log_level);
    connection.service.service().route_logs(cx.request.peer.clone(), cx.request.id.clone(), wanted)
}

/// Waits on `call` for the client of `forward`: relays the server's questions in the client's
/// era and returns the server's answer, or `Failure::Asked` when a 2026-07-28 client must
/// answer first (the request parked as a flight).
pub(crate) async fn fly(forward: &Forward<'_>, mut call: InFlight) -> Result<Landing, Failure> {
    let (cx, entry, gateway) = (forward.cx, forward.entry, forward.gateway);
    let server = entry.row.name.as_str();
    // What the server reports goes to this client call under its own token, if it gave one.
    let _progress = cx.request.meta.get_progress_token().map(|token| {
        call.connection.service.service().route_progress(call.progress.clone(), cx.request.peer.clone(), token)
    });
    // And its log messages, at the level this client asked for (routed before the request
    // was sent; a resumed flight's go to the retry).
    let _logs = match call.logs.take() {
        Some(route) => route,
        None => log_route(forward, &call.connection),
    };
    let questions = call.connection.service.service().questions.clone();
    loop {
        let started = tokio::time::Instant::now();
        let next = tokio::select! {
            _ = cx.request.ct.cancelled() => return Err(Failure::Cancelled),
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
        if !cx.caller.round_trips {
            let reply = tokio::select! {
                _ = cx.request.ct.cancelled() => return Err(Failure::Cancelled),
                reply = relay_question(cx, entry, &questions, question.params) => reply,
            };
            let _ = question.answer.send(reply);
            continue;
        }
        // MCP 2026-07-28: the question becomes a round of the broker's; the call waits here.
        let Some(round) = cx.caller.round.as_ref() else {
            let _ = question.answer.send(Err(unaskable_error(server)));
            return Ok(Landing::Broker(unaskable_result(server, &question.params)));
        };
        // 2026-07-28 has no elicitationId: the server's is never shown, and the retry
        // answers it.
        let shown = match shown_question(server, cx.caller, question.params, String::new()) {
            Ok((shown, _)) => shown,
            Err(why) => {
                let _ = question.answer.send(Err(why.for_server(server)));
                continue;
            }
        };
        match gateway.flights.park(&cx.caller.user.user_id, &entry.row.id, call, question.answer) {
            Ok(id) => {
                let flight = FlightRound { server_id: entry.row.id.clone(), flight: id, key: FLIGHT_KEY.into() };
                // The home is good for as long as the flight waits (rounded up).
                let until = cx.core.now() + cx.core.config.gateway.question_wait.as_secs() as i64 + 1;
                let home = gateway.home.tag(&cx.core.sealer, &cx.caller.user.user_id, until);
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

/// A 2026-07-28 client's retry after a server's mid-request question: the answer to the
/// waiting server request, then the same request waited on again. `again` is what an expired
/// flight's answer tells the client to do ([`question_expired`]).
pub(crate) async fn resume(forward: &Forward<'_>, again: &str) -> Result<Landing, Failure> {
    let (cx, entry) = (forward.cx, forward.entry);
    let server = entry.row.name.as_str();
    let Some((flight, answer)) = cx.caller.round.as_ref().and_then(|round| round.flight()) else {
        return Ok(Landing::Broker(question_expired(server, again)));
    };
    // The state names the server it was asked for; a flight is only taken by its own user's
    // retry to that same server.
    let parked = (flight.server_id == entry.row.id)
        .then(|| forward.gateway.flights.parking.take(&flight.flight, &cx.caller.user.user_id, &entry.row.id))
        .flatten();
    let Some((call, waiting)) = parked else { return Ok(Landing::Broker(question_expired(server, again))) };
    let answer = answer.cloned().unwrap_or_else(|| ElicitResult::new(ElicitationAction::Cancel));
    if waiting.send(Ok(answer)).is_err() {
        // The server stopped asking (its request was cancelled): its answer is still to come.
        tracing::debug!(server = %entry.row.name, "a server's question ended before the user's answer arrived");
    }
    fly(forward, call).await
}

/// How a forwarded request is sent: to a server of the stateless 2026-07-28 revision, with the
/// log level its client wants in `_meta` (such a server logs only when a request asks; a
/// 2025-11-25 server's messages are filtered on the connection,
/// [`crate::mcp::gateway::upstream::client`]).
fn upstream_options(entry: &ServerEntry, wanted: &LogWanted) -> PeerRequestOptions {
    let mut options = PeerRequestOptions::no_options();
    if entry.revision.get() != Some(Revision::Stateless) {
        return options;
    }
    if let Some(level) = wanted.minimum() {
        let mut meta = rmcp::model::RequestMetaObject::new();
        meta.set_log_level(level);
        options.meta = Some(meta);
    }
    options
}
