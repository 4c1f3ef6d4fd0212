//! `prompts/get` and `resources/read` of a server behind the broker: the same gates as a tool
//! call ([`super::gates`]: the (client, server) pair, the user's own credential on the user's
//! own connection, a 401's one refresh and retry, a server that is down, audit and metrics),
//! then one plain request, the server's own questions relayed as a call's are
//! ([`super::rounds`], [`super::server_pages`]).
//!
//! The gates answer in a tool's shape (a link as `-32042` or `InputRequiredResult`, or text
//! the user reads); here that becomes the method's own: `-32042` and `InputRequiredResult` as
//! they are, text as a JSON-RPC error carrying it (a server that is down: `-32603` with
//! `data` `{"error": "server_unavailable", "server", "retryAfter"}`, the broker's retryable
//! shape). A 2026-07-28 request gets a round ([`crate::mcp::input_required`]) bound to its
//! method and name, so the retry after the browser waits for the user as a tool call's does.

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CallToolResponse, ClientRequest, ErrorData, GetPromptRequest, GetPromptRequestParams, GetPromptResponse,
    JsonObject, ReadResourceRequest, ReadResourceRequestParams, ReadResourceResponse, ResourceContents, ServerResult,
};
use serde_json::Value;

use super::forwarded::{Answer, Forward, Forwarded};
use super::gates;
use super::outcome::audit;
use crate::mcp::browser_wait::after_browser;
use crate::mcp::caller::Caller;
use crate::mcp::context::Context;
use crate::mcp::gateway::catalogue::registry::ServerEntry;
use crate::mcp::gateway::catalogue::uri;
use crate::mcp::gateway::state::Gateway;
use crate::mcp::input_required::{Round, RoundRequest, state};
use crate::mcp::prompts::args;
use crate::mcp::resources::uri::not_found;
use crate::mcp::results::Unfinished;

/// `prompts/get` of a prompt a server behind the broker lists; `None` if none does.
// MCP 2025-11-25 server/prompts §Getting a Prompt.
pub(crate) async fn get_prompt(
    cx: Context<'_>,
    gateway: &Arc<Gateway>,
    request: &GetPromptRequestParams,
) -> Option<Result<GetPromptResponse, ErrorData>> {
    let (entry, prompt, theirs) = gateway.resolve_prompt(&request.name)?;
    // Checked as the broker's own prompts are, against what the client was shown.
    let declared = prompt.arguments.as_deref().unwrap_or_default();
    let values = match args::check(&request.name, declared, request.arguments.clone()) {
        Ok(values) => values,
        Err(error) => return Some(Err(error)),
    };
    let round = RoundOf {
        method: "prompts/get",
        name: &request.name,
        arguments: request.arguments.as_ref(),
        input_responses: request.input_responses.as_ref(),
        request_state: request.request_state.as_deref(),
    };
    let caller = match with_round(cx, round).await {
        Ok(caller) => caller,
        Err(ended) => return Some(ended.into_prompt()),
    };
    let cx = cx.for_caller(&caller);
    let mut params = GetPromptRequestParams::new(&theirs);
    params.arguments = Some(values.into_iter().map(|(k, v)| (k, Value::String(v))).collect::<JsonObject>());
    let sent = Box::new(ClientRequest::GetPromptRequest(GetPromptRequest::new(params)));
    let what = Forwarded::Plain { request: sent, responses: request.input_responses.as_ref(), sent_over: None };
    let started = Instant::now();
    let (answer, outcome) = gates::pass(&Forward::new(cx, gateway, &entry, what)).await;
    audit(cx, &entry, &format!("prompt={theirs}"), outcome, started.elapsed()).await;
    Some(match plain(&entry, answer) {
        Err(error) => Err(error),
        Ok(Plain::InputRequired(result)) => Ok(GetPromptResponse::InputRequired(*result)),
        Ok(Plain::Done(done)) => match *done {
            ServerResult::GetPromptResult(result) => Ok(result.into()),
            other => Err(unexpected(&entry, &other)),
        },
    })
}

/// `resources/read` of a URI in the gateway's scheme ([`uri`]): `None` if `uri` is not one;
/// -32002 if it names no registered server.
// MCP 2025-11-25 server/resources §Reading Resources.
pub(crate) async fn read(
    cx: Context<'_>,
    gateway: &Arc<Gateway>,
    request: &ReadResourceRequestParams,
) -> Option<Result<ReadResourceResponse, ErrorData>> {
    if !uri::is_gateway(&request.uri) {
        return None;
    }
    let Some((entry, theirs)) = gateway.resolve_resource(&request.uri) else {
        return Some(Err(not_found(&request.uri)));
    };
    let round = RoundOf {
        method: "resources/read",
        name: &request.uri,
        arguments: None,
        input_responses: request.input_responses.as_ref(),
        request_state: request.request_state.as_deref(),
    };
    let caller = match with_round(cx, round).await {
        Ok(caller) => caller,
        Err(ended) => return Some(ended.into_read()),
    };
    let cx = cx.for_caller(&caller);
    let params = ReadResourceRequestParams::new(theirs);
    let sent = Box::new(ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params)));
    let what = Forwarded::Plain { request: sent, responses: request.input_responses.as_ref(), sent_over: None };
    let started = Instant::now();
    let (answer, outcome) = gates::pass(&Forward::new(cx, gateway, &entry, what)).await;
    // The URI is left out of the audit: a template's values are the client's arguments.
    audit(cx, &entry, "resource=read", outcome, started.elapsed()).await;
    let done = match plain(&entry, answer) {
        Err(error) => return Some(Err(error)),
        Ok(Plain::InputRequired(result)) => return Some(Ok(ReadResourceResponse::InputRequired(*result))),
        Ok(Plain::Done(done)) => *done,
    };
    Some(match done {
        ServerResult::ReadResourceResult(mut result) => {
            // The contents name the server's URIs; the client knows them in the gateway's scheme.
            for contents in result.contents.iter_mut() {
                let (ResourceContents::TextResourceContents { uri, .. }
                | ResourceContents::BlobResourceContents { uri, .. }) = contents
                else {
                    continue;
                };
                *uri = uri::wrap(&entry.row.name, uri);
            }
            Ok(result.into())
        }
        other => Err(unexpected(&entry, &other)),
    })
}

/// For a 2026-07-28 request, the caller with its round (a retry's state checked first, a retry
/// after the broker's browser link waiting for the user); a 2025-11-25 caller as it is.
async fn with_round(cx: Context<'_>, request: RoundOf<'_>) -> Result<Caller, Ended> {
    if !cx.caller.round_trips {
        return Ok(cx.caller.clone());
    }
    // Only the broker hands out states for a server's prompts and resources.
    if request.request_state.is_some_and(|s| !state::is_ours(s)) {
        return Err(Ended::Error(state::refused()));
    }
    let client = cx.caller.user.client.key();
    let round = Round::open(
        cx.app,
        RoundRequest {
            user_id: &cx.caller.user.user_id,
            client: &client,
            method: request.method,
            name: request.name,
            arguments: request.arguments,
            input_responses: request.input_responses,
            request_state: request.request_state,
        },
    )
    .await
    .map_err(Ended::Error)?;
    let caller = cx.caller.with_round(round);
    match after_browser(cx.for_caller(&caller), request.name).await {
        Ok(None) => Ok(caller),
        Ok(Some(ended)) => Err(Ended::Answer(Box::new(Answer::Tool(ended.into())))),
        Err(Unfinished::Error(error)) => Err(Ended::Error(error)),
        Err(Unfinished::InputRequired(result)) => Err(Ended::InputRequired(result)),
    }
}

/// The request a round is bound to.
struct RoundOf<'a> {
    method: &'a str,
    name: &'a str,
    arguments: Option<&'a JsonObject>,
    input_responses: Option<&'a rmcp::model::InputResponses>,
    request_state: Option<&'a str>,
}

/// A request that ended before it reached the server.
enum Ended {
    Error(ErrorData),
    InputRequired(Box<rmcp::model::InputRequiredResult>),
    Answer(Box<Answer>),
}

impl Ended {
    fn into_plain(self, entry_name: Option<&str>) -> Result<Plain, ErrorData> {
        match self {
            Ended::Error(error) => Err(error),
            Ended::InputRequired(result) => Ok(Plain::InputRequired(result)),
            Ended::Answer(answer) => tool_shaped(entry_name, *answer),
        }
    }

    fn into_prompt(self) -> Result<GetPromptResponse, ErrorData> {
        match self.into_plain(None)? {
            Plain::InputRequired(result) => Ok(GetPromptResponse::InputRequired(*result)),
            Plain::Done(_) => Err(ErrorData::internal_error("the request ended without an answer", None)),
        }
    }

    fn into_read(self) -> Result<ReadResourceResponse, ErrorData> {
        match self.into_plain(None)? {
            Plain::InputRequired(result) => Ok(ReadResourceResponse::InputRequired(*result)),
            Plain::Done(_) => Err(ErrorData::internal_error("the request ended without an answer", None)),
        }
    }
}

/// A plain request's outcome, before the method's own type.
pub(crate) enum Plain {
    Done(Box<ServerResult>),
    InputRequired(Box<rmcp::model::InputRequiredResult>),
}

/// What the gates answered ([`super::gates::pass`]), in a plain request's terms.
pub(crate) fn plain(entry: &ServerEntry, answer: Result<Answer, Unfinished>) -> Result<Plain, ErrorData> {
    match answer {
        Err(Unfinished::Error(error)) => Err(error),
        Err(Unfinished::InputRequired(result)) => Ok(Plain::InputRequired(result)),
        Ok(answer) => tool_shaped(Some(entry.row.name.as_str()), answer),
    }
}

/// The server's own answer as it came; the broker's answer in a tool's shape (text for the
/// user, a retryable failure) as a JSON-RPC error carrying the same text and data.
fn tool_shaped(server: Option<&str>, answer: Answer) -> Result<Plain, ErrorData> {
    match answer {
        // The server's own rounds were relayed before this ([`super::rounds`]).
        Answer::Plain(Ok(ServerResult::InputRequiredResult(_))) => Err(ErrorData::internal_error(
            format!("The server {} asked for input that was not relayed.", server.unwrap_or("")),
            None,
        )),
        Answer::Plain(Ok(result)) => Ok(Plain::Done(Box::new(result))),
        Answer::Plain(Err(error)) => Err(error),
        Answer::Tool(CallToolResponse::Complete(result)) => {
            let text: Vec<String> = result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect();
            Err(ErrorData::internal_error(text.join("\n"), result.structured_content))
        }
        Answer::Tool(CallToolResponse::InputRequired(result)) => Ok(Plain::InputRequired(Box::new(result))),
        Answer::Tool(_) => Err(ErrorData::internal_error("the request ended without an answer", None)),
    }
}

pub(crate) fn unexpected(entry: &ServerEntry, _result: &ServerResult) -> ErrorData {
    tracing::warn!(server = %entry.row.name, "a server behind the broker answered with another method's result");
    ErrorData::internal_error(format!("The server {} answered with an unexpected result.", entry.row.name), None)
}
