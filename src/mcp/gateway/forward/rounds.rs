//! A 2026-07-28 server's own questions: a server that speaks the stateless revision
//! ([`crate::mcp::gateway::upstream::revision`]) answers a call it needs the user for with an `InputRequiredResult` —
//! `inputRequests` by key and a `requestState` of its own (SEP-2322) — and expects the same call
//! again with `inputResponses` and its state. The broker relays the round in the client's era:
//!
//! - **A 2026-07-28 client** gets an `InputRequiredResult` of the broker's: the server's keys,
//!   each question worded as [`super::questions`] words them (naming the server; a URL only when it
//!   would relay it, never presented as the broker's page), and a `requestState` of the broker's
//!   own that carries the server's state and the keys it asked
//!   ([`crate::mcp::input_required::ServerRound`]): sealed with the broker's keys and bound to the
//!   user, client, tool and arguments, so the client can neither read nor alter it, nor carry it
//!   into another call; it expires with the connect link's lifetime and is spent on its first
//!   use. On the retry the server gets its own state back, with the client's responses to the
//!   keys it asked and nothing else.
//! - **A 2025-11-25 session** is asked each question as a nested `elicitation/create` on the
//!   client's call stream ([`super::questions::relay_question`], as for a 2025-11-25 server's
//!   questions), and the broker retries upstream with the answers, for at most [`MAX_ROUNDS`]
//!   rounds. A URL elicitation's completion cannot be relayed (a stateless server has no channel
//!   for `notifications/elicitation/complete`).
//! - **A `token-exchange` server's round** that carries only the broker's own links is the
//!   `-32042` such a server answers with in a session, and is answered as that
//!   ([`super::brokers_link`]).
//! - **What cannot be relayed** — sampling or roots, a mode the client did not declare, a URL the
//!   broker does not pass on, a state larger than [`MAX_SERVER_STATE`] — ends the call with an
//!   `isError` naming the server, `structuredContent` `{"error": "question_not_relayable",
//!   "server", "mode"}` as for a question asked mid-call.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest, ElicitRequest, ElicitRequestParams,
    InputRequest, InputRequests, InputRequiredResult, InputResponses, ServerResult,
};

use super::attempt;
use super::brokers_link::brokers_link_in_round;
use super::failure::Failure;
use super::forwarded::{Answer, Forward, Forwarded};
use super::questions::{not_relayable, relay_question, shown_question};
use crate::mcp::caller::Caller;
use crate::mcp::gateway::catalogue::registry::Target;
use crate::mcp::gateway::upstream::credential::Credential;
use crate::mcp::gateway::upstream::questions::Questions;
use crate::mcp::input_required::ServerRound;
use crate::mcp::results::error_result;

/// Rounds one call may take with a 2025-11-25 client before the broker gives up on the server.
pub const MAX_ROUNDS: usize = 10;

/// The largest server `requestState` the broker carries (the broker's own state, which seals it,
/// is refused above 16 KiB).
pub const MAX_SERVER_STATE: usize = 8 * 1024;

/// What a retry carries back to the server: its own state, and the client's responses to the
/// keys the server asked — never the client's own state, nor its other responses. Nothing on a
/// first request, or on a retry after the server's pages (a round with neither).
pub(crate) fn carried_back(
    client_responses: Option<&InputResponses>,
    carried: Option<&ServerRound>,
) -> (Option<InputResponses>, Option<String>) {
    let Some(round) = carried.filter(|round| round.state.is_some() || !round.keys.is_empty()) else {
        return (None, None);
    };
    let responses: InputResponses = client_responses
        .into_iter()
        .flatten()
        .filter(|(key, _)| round.keys.contains(key))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    (Some(responses), round.state.clone())
}

/// The request as it goes to the server, with what a retry carries back.
enum Outgoing<'a> {
    Tool { target: &'a Target, params: CallToolRequestParams },
    Plain(ClientRequest),
}

impl<'a> Outgoing<'a> {
    fn of(forwarded: &Forwarded<'a>, responses: Option<InputResponses>, state: Option<String>) -> Self {
        match forwarded {
            Forwarded::Tool { target, request } => {
                let mut params = CallToolRequestParams::new(request.name.clone());
                params.arguments = request.arguments.clone();
                params.input_responses = responses;
                params.request_state = state;
                Outgoing::Tool { target, params }
            }
            Forwarded::Plain { request, .. } => {
                let mut request = (**request).clone();
                match &mut request {
                    ClientRequest::GetPromptRequest(get) => {
                        get.params.input_responses = responses;
                        get.params.request_state = state;
                    }
                    ClientRequest::ReadResourceRequest(read) => {
                        read.params.input_responses = responses;
                        read.params.request_state = state;
                    }
                    _ => {}
                }
                Outgoing::Plain(request)
            }
        }
    }
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

/// One try of what is forwarded ([`attempt::tool`] or [`attempt::plain`]) with the server's
/// round trips relayed: a 2026-07-28 client's retry is carried back to the server, and a
/// 2025-11-25 client is asked within its request.
pub(crate) async fn attempt(forward: &Forward<'_>, credential: Option<Credential>) -> Result<Answer, Failure> {
    let (cx, entry) = (forward.cx, forward.entry);
    // A retry that answers a server's question asked mid-request: the request is still
    // waiting (its state is bound to this very method, name and arguments).
    if cx.caller.round.as_ref().is_some_and(|round| round.flight().is_some()) {
        return attempt::resumed(forward).await;
    }
    let carried = cx.caller.round.as_ref().and_then(|round| round.server_round());
    if carried.is_some_and(|round| round.server_id != entry.row.id) {
        // The name now stands for another registration: its state is no use to this one.
        let text = format!(
            "The server {} was registered again since this request began; send it again without requestState.",
            entry.row.name
        );
        return Ok(Answer::Tool(error_result(text).into()));
    }
    let (responses, state) = carried_back(forward.what.client_responses(), carried);
    let mut outgoing = Outgoing::of(&forward.what, responses, state);
    for _ in 0..MAX_ROUNDS {
        // Sent as it is: a further round builds the next request from what is forwarded.
        let answer = match outgoing {
            Outgoing::Tool { target, params } => {
                Answer::Tool(attempt::tool(forward, target, params, credential.clone()).await?)
            }
            Outgoing::Plain(request) => attempt::plain(forward, request, credential.clone()).await?,
        };
        let asked = match answer {
            Answer::Tool(CallToolResponse::InputRequired(asked)) => asked,
            Answer::Plain(Ok(ServerResult::InputRequiredResult(asked))) => asked,
            answer => return Ok(answer),
        };
        if let Some(link) = brokers_link_in_round(cx, entry, &asked).await {
            return Err(Failure::ServerLink { error: link, questions: None });
        }
        let state = asked.request_state.clone();
        let relayed = tokio::select! {
            _ = cx.request.ct.cancelled() => return Err(Failure::Cancelled),
            relayed = relay_round(forward, asked) => relayed,
        };
        match relayed {
            Relayed::ToClient(result) => return Ok(Answer::Tool(CallToolResponse::InputRequired(result))),
            Relayed::Ended(result) => return Ok(Answer::Tool(result.into())),
            Relayed::Answered(responses) => outgoing = Outgoing::of(&forward.what, Some(responses), state),
        }
    }
    let text =
        format!("The server {} kept asking for input ({MAX_ROUNDS} rounds); the request was stopped.", entry.row.name);
    Ok(Answer::Tool(error_result(text).into()))
}

/// One `InputRequiredResult` of the server's, in the client's era.
async fn relay_round(forward: &Forward<'_>, asked: InputRequiredResult) -> Relayed {
    let (cx, entry) = (forward.cx, forward.entry);
    let server = entry.row.name.as_str();
    if asked.request_state.as_ref().is_some_and(|state| state.len() > MAX_SERVER_STATE) {
        return Relayed::Ended(not_relayable(server, "state", "its requestState is too large to carry"));
    }
    let requests = asked.input_requests.unwrap_or_default();
    match &cx.caller.round {
        Some(round) => {
            let mut shown = InputRequests::new();
            for (key, request) in requests {
                let InputRequest::Elicitation(elicit) = request else {
                    return Relayed::Ended(not_relayable(server, "other", "only elicitation is relayed"));
                };
                match for_round_trip(server, cx.caller, elicit.params) {
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
                match relay_question(cx, entry, &questions, elicit.params).await {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

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

        let client = request.input_responses.as_ref();
        assert_eq!(carried_back(client, None), (None, None), "a first request carries neither");
        let pages = ServerRound { server_id: "s".into(), state: None, keys: Vec::new() };
        assert_eq!(carried_back(client, Some(&pages)), (None, None), "a retry after the server's pages");

        let round = ServerRound { server_id: "s".into(), state: Some("theirs".into()), keys: vec!["name".into()] };
        let (responses, state) = carried_back(client, Some(&round));
        assert_eq!(state.as_deref(), Some("theirs"));
        let responses = responses.unwrap();
        assert_eq!(responses.keys().collect::<Vec<_>>(), ["name"], "the broker's own key stays with the broker");

        let forwarded = Forwarded::Tool { target: &Target::Tool("ask".into()), request: &request };
        let Outgoing::Tool { params, .. } = Outgoing::of(&forwarded, Some(responses), state) else { panic!() };
        assert_eq!(params.arguments, request.arguments, "the client's arguments go as they came");
        assert_eq!(params.request_state.as_deref(), Some("theirs"));

        let read = ClientRequest::ReadResourceRequest(rmcp::model::ReadResourceRequest::new(
            rmcp::model::ReadResourceRequestParams::new("note://x"),
        ));
        let forwarded = Forwarded::Plain { request: Box::new(read), responses: None, sent_over: None };
        let Outgoing::Plain(ClientRequest::ReadResourceRequest(read)) =
            Outgoing::of(&forwarded, None, Some("theirs".into()))
        else {
            panic!()
        };
        assert_eq!((read.params.uri.as_str(), read.params.request_state.as_deref()), ("note://x", Some("theirs")));
    }
}
