//! A 2026-07-28 server's own questions: a server that speaks the stateless revision
//! ([`super::revision`]) answers a call it needs the user for with an `InputRequiredResult` —
//! `inputRequests` by key and a `requestState` of its own (SEP-2322) — and expects the same call
//! again with `inputResponses` and its state. The broker relays the round in the client's era:
//!
//! - **A 2026-07-28 client** gets an `InputRequiredResult` of the broker's: the server's keys,
//!   each question worded as [`super::relay`] words them (naming the server; a URL only when it
//!   would relay it, never presented as the broker's page), and a `requestState` of the broker's
//!   own that carries the server's state and the keys it asked
//!   ([`crate::mcp::input_required::ServerRound`]): sealed with the broker's keys and bound to the
//!   user, client, tool and arguments, so the client can neither read nor alter it, nor carry it
//!   into another call; it expires with the connect link's lifetime and is spent on its first
//!   use. On the retry the server gets its own state back, with the client's responses to the
//!   keys it asked and nothing else.
//! - **A 2025-11-25 session** is asked each question as a nested `elicitation/create` on the
//!   client's call stream ([`BrokerServer::relay_question`], as for a 2025-11-25 server's
//!   questions), and the broker retries upstream with the answers, for at most [`MAX_ROUNDS`]
//!   rounds. A URL elicitation's completion cannot be relayed (a stateless server has no channel
//!   for `notifications/elicitation/complete`).
//! - **A `token-exchange` server's round** that carries only the broker's own links is the
//!   `-32042` such a server answers with in a session, and is answered as that (`server_link`).
//! - **What cannot be relayed** — sampling or roots, a mode the client did not declare, a URL the
//!   broker does not pass on, a state larger than [`MAX_SERVER_STATE`] — ends the call with an
//!   `isError` naming the server, `structuredContent` `{"error": "question_not_relayable",
//!   "server", "mode"}` as for a question asked mid-call.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ElicitRequest, ElicitRequestParams, InputRequest,
    InputRequests, InputRequiredResult, InputResponses,
};
use rmcp::service::RequestContext;
use serde_json::json;

use super::Gateway;
use super::plain::Failure;
use super::pool::ConnectionKey;
use super::registry::{ServerEntry, Target};
use super::relay::{Questions, shown_question};
use super::transport::Credential;
use crate::mcp::handler::{BrokerServer, Caller};
use crate::mcp::input_required::ServerRound;
use crate::mcp::results::error_result;

/// Rounds one call may take with a 2025-11-25 client before the broker gives up on the server.
pub const MAX_ROUNDS: usize = 10;

/// The largest server `requestState` the broker carries (the broker's own state, which seals it,
/// is refused above 16 KiB).
pub const MAX_SERVER_STATE: usize = 8 * 1024;

/// The call as it goes to the server: the client's arguments and — on a retry that carries a
/// round of the server's back — the server's own state with the client's responses to the keys
/// the server asked. Never the client's own state, nor its other responses.
pub(crate) fn upstream_request(
    request: &CallToolRequestParams,
    carried: Option<&ServerRound>,
) -> CallToolRequestParams {
    let mut upstream = CallToolRequestParams::new(request.name.clone());
    upstream.arguments = request.arguments.clone();
    if let Some(round) = carried.filter(|round| round.state.is_some() || !round.keys.is_empty()) {
        let responses: InputResponses = request
            .input_responses
            .iter()
            .flatten()
            .filter(|(key, _)| round.keys.contains(key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        upstream.input_responses = Some(responses);
        upstream.request_state = round.state.clone();
    }
    upstream
}

/// What became of one `InputRequiredResult` of the server's.
enum Relayed {
    /// For a 2026-07-28 client: the broker's own `InputRequiredResult`.
    ToClient(InputRequiredResult),
    /// A 2025-11-25 client answered: the retry for the server.
    Answered(InputResponses),
    /// It could not be relayed: the client's answer.
    Ended(CallToolResult),
}

/// The `isError` for a question of `server`'s that cannot reach the user.
pub(super) fn not_relayable(server: &str, mode: &str, why: &str) -> CallToolResult {
    let mut result = error_result(format!("The server {server} asked for input that the broker cannot relay: {why}"));
    result.structured_content = Some(json!({"error": "question_not_relayable", "server": server, "mode": mode}));
    result
}

fn mode_of(params: &ElicitRequestParams) -> &'static str {
    match params {
        ElicitRequestParams::FormElicitationParams { .. } => "form",
        ElicitRequestParams::UrlElicitationParams { .. } => "url",
        _ => "unknown",
    }
}

/// A server's question as a 2026-07-28 client is shown it ([`shown_question`]; no elicitation
/// id: the retry answers it), or the reason it is not shown.
fn for_round_trip(
    server: &str,
    caller: &Caller,
    params: ElicitRequestParams,
) -> Result<ElicitRequestParams, CallToolResult> {
    shown_question(server, caller, params, String::new())
        .map(|(shown, _)| shown)
        .map_err(|why| not_relayable(server, why.mode(), &why.for_user()))
}

impl BrokerServer {
    /// [`BrokerServer::attempt`], with the server's round trips relayed: a 2026-07-28 client's
    /// retry is carried back to the server, and a 2025-11-25 client is asked in the call.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn attempt_rounds(
        &self,
        gateway: &Arc<Gateway>,
        entry: &Arc<ServerEntry>,
        key: &ConnectionKey,
        credential: Option<Credential>,
        target: &Target,
        caller: &Caller,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Failure> {
        // A retry that answers a server's question asked mid-call: the call is still waiting.
        if caller.round.as_ref().is_some_and(|round| round.flight().is_some()) {
            return self.resume_flight(gateway, entry, key, caller, ctx).await;
        }
        let carried = caller.round.as_ref().and_then(|round| round.server_round());
        if carried.is_some_and(|round| round.server_id != entry.row.id) {
            // The name now stands for another registration: its state is no use to this one.
            let text = format!(
                "The server {} was registered again since this call began; call the tool again without requestState.",
                entry.row.name
            );
            return Ok(error_result(text).into());
        }
        let mut upstream = upstream_request(request, carried);
        for _ in 0..MAX_ROUNDS {
            let answer = self.attempt(gateway, entry, key, credential.clone(), target, caller, &upstream, ctx).await?;
            let CallToolResponse::InputRequired(asked) = answer else { return Ok(answer) };
            if let Some(link) = self.brokers_link_in_round(entry, caller, &asked).await {
                return Err(Failure::ServerLink { error: link, questions: None });
            }
            let state = asked.request_state.clone();
            let relayed = tokio::select! {
                _ = ctx.ct.cancelled() => return Err(Failure::Cancelled),
                relayed = self.relay_round(entry, caller, ctx, asked) => relayed,
            };
            match relayed {
                Relayed::ToClient(result) => return Ok(CallToolResponse::InputRequired(result)),
                Relayed::Ended(result) => return Ok(result.into()),
                Relayed::Answered(responses) => {
                    upstream = upstream_request(request, None);
                    upstream.input_responses = Some(responses);
                    upstream.request_state = state;
                }
            }
        }
        let text =
            format!("The server {} kept asking for input ({MAX_ROUNDS} rounds); the call was stopped.", entry.row.name);
        Ok(error_result(text).into())
    }

    /// One `InputRequiredResult` of the server's, in the client's era.
    async fn relay_round(
        &self,
        entry: &ServerEntry,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
        asked: InputRequiredResult,
    ) -> Relayed {
        let server = entry.row.name.as_str();
        if asked.request_state.as_ref().is_some_and(|state| state.len() > MAX_SERVER_STATE) {
            return Relayed::Ended(not_relayable(server, "state", "its requestState is too large to carry"));
        }
        let requests = asked.input_requests.unwrap_or_default();
        match &caller.round {
            Some(round) => {
                let mut shown = InputRequests::new();
                for (key, request) in requests {
                    let InputRequest::Elicitation(elicit) = request else {
                        return Relayed::Ended(not_relayable(server, "other", "only elicitation is relayed"));
                    };
                    match for_round_trip(server, caller, elicit.params) {
                        Ok(params) => shown.insert(key, InputRequest::Elicitation(ElicitRequest::new(params))),
                        Err(result) => return Relayed::Ended(result),
                    };
                }
                let keys = shown.keys().cloned().collect();
                let carried = ServerRound { server_id: entry.row.id.clone(), state: asked.request_state, keys };
                Relayed::ToClient(round.ask_for_server(shown, carried))
            }
            None => {
                // Links are remembered for completion notifications a stateless server never sends.
                let questions = Questions::default();
                let mut responses = InputResponses::new();
                for (key, request) in requests {
                    let InputRequest::Elicitation(elicit) = request else {
                        return Relayed::Ended(not_relayable(server, "other", "only elicitation is relayed"));
                    };
                    let mode = mode_of(&elicit.params);
                    match self.relay_question(entry, caller, ctx, &questions, elicit.params).await {
                        Ok(answer) => {
                            responses.insert(key, serde_json::to_value(answer).unwrap_or_default());
                        }
                        Err(error) => return Relayed::Ended(not_relayable(server, mode, &error.message)),
                    }
                }
                Relayed::Answered(responses)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_servers_own_state_and_the_answers_to_its_keys_go_upstream() {
        let mut request = CallToolRequestParams::new("crm_ask");
        request.arguments = json!({"q": 1}).as_object().cloned();
        request.request_state = Some("ob1.brokers-own".into());
        request.input_responses = Some(InputResponses::from([
            ("name".to_owned(), json!({"action": "accept", "content": {"name": "Ada"}})),
            ("authorize".to_owned(), json!({"action": "accept"})),
        ]));

        let first = upstream_request(&request, None);
        assert_eq!((first.request_state, first.input_responses), (None, None), "a first call carries neither");
        assert_eq!(first.arguments, request.arguments);

        let round = ServerRound { server_id: "s".into(), state: Some("theirs".into()), keys: vec!["name".into()] };
        let retry = upstream_request(&request, Some(&round));
        assert_eq!(retry.request_state.as_deref(), Some("theirs"));
        let responses = retry.input_responses.unwrap();
        assert_eq!(responses.keys().collect::<Vec<_>>(), ["name"], "the broker's own key stays with the broker");
    }
}
