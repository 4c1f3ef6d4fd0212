//! `prompts/get` and `resources/read` of a server behind the broker: the same gates as a tool
//! call ([`super::call`]: the (client, server) pair, the user's own credential on the user's
//! own connection, a 401's one refresh and retry, a server that is down, audit and metrics),
//! then one plain request, the server's own questions relayed as a call's are
//! ([`super::rounds`], [`super::pages`]).
//!
//! The gates answer in a tool's shape (a link as `-32042` or `InputRequiredResult`, or text
//! the user reads); here that becomes the method's own: `-32042` and `InputRequiredResult` as
//! they are, text as a JSON-RPC error carrying it (a server that is down: `-32603` with
//! `data` `{"error": "server_unavailable", "server", "retryAfter"}`, the broker's retryable
//! shape). A 2026-07-28 request gets a round ([`crate::mcp::input_required`]) bound to its
//! method and name, so the retry after the browser waits for the user as a tool call's does.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolResponse, ClientRequest, ErrorData, GetPromptRequest, GetPromptRequestParams, GetPromptResponse,
    JsonObject, ReadResourceRequest, ReadResourceRequestParams, ReadResourceResponse, ResourceContents, ServerResult,
};
use rmcp::service::RequestContext;
use serde_json::Value;

use super::Gateway;
use super::call::{Answer, Forwarded};
use super::registry::ServerEntry;
use crate::mcp::handler::{BrokerServer, Caller};
use crate::mcp::input_required::{Round, RoundRequest, state};
use crate::mcp::results::Unfinished;

impl BrokerServer {
    /// `prompts/get` of a prompt a server behind the broker lists; `None` if none does.
    // MCP 2025-11-25 server/prompts §Getting a Prompt.
    pub(crate) async fn gateway_prompt(
        &self,
        caller: &Caller,
        request: &GetPromptRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Option<Result<GetPromptResponse, ErrorData>> {
        let gateway = self.state.gateway.clone();
        let (entry, prompt, upstream) = gateway.resolve_prompt(&request.name)?;
        Some(self.forward_prompt(&gateway, &entry, &prompt, &upstream, caller, request, ctx).await)
    }

    #[allow(clippy::too_many_arguments)]
    async fn forward_prompt(
        &self,
        gateway: &Arc<Gateway>,
        entry: &Arc<ServerEntry>,
        prompt: &rmcp::model::Prompt,
        upstream: &str,
        caller: &Caller,
        request: &GetPromptRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        // Checked as the broker's own prompts are, against what the client was shown.
        let declared = prompt.arguments.as_deref().unwrap_or_default();
        let values = crate::mcp::prompts::args::check(&request.name, declared, request.arguments.clone())?;
        let round = RoundOf {
            method: "prompts/get",
            name: &request.name,
            arguments: request.arguments.as_ref(),
            input_responses: request.input_responses.as_ref(),
            request_state: request.request_state.as_deref(),
        };
        let caller = match self.with_round(caller, round, ctx).await {
            Ok(caller) => caller,
            Err(ended) => return ended.into_prompt(),
        };
        let mut params = GetPromptRequestParams::new(upstream);
        params.arguments = Some(values.into_iter().map(|(k, v)| (k, Value::String(v))).collect::<JsonObject>());
        let sent = Box::new(ClientRequest::GetPromptRequest(GetPromptRequest::new(params)));
        let forwarded =
            Forwarded::Plain { request: sent, responses: request.input_responses.as_ref(), sent_over: None };
        let started = std::time::Instant::now();
        let (answer, outcome) = self.forward(gateway, entry, &forwarded, &caller, ctx).await;
        self.audit_call(entry, &format!("prompt={upstream}"), &caller, outcome, started.elapsed()).await;
        match plain(entry, answer)? {
            Plain::InputRequired(result) => Ok(GetPromptResponse::InputRequired(*result)),
            Plain::Done(done) => match *done {
                ServerResult::GetPromptResult(result) => Ok(result.into()),
                other => Err(unexpected(entry, &other)),
            },
        }
    }

    /// `resources/read` of a URI in the gateway's scheme ([`super::uri`]): `None` if `uri` is
    /// not one; -32002 if it names no registered server.
    // MCP 2025-11-25 server/resources §Reading Resources.
    pub(crate) async fn gateway_read(
        &self,
        caller: &Caller,
        request: &ReadResourceRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Option<Result<ReadResourceResponse, ErrorData>> {
        if !super::uri::is_gateway(&request.uri) {
            return None;
        }
        let gateway = self.state.gateway.clone();
        let Some((entry, upstream)) = gateway.resolve_resource(&request.uri) else {
            return Some(Err(crate::mcp::resources::uri::not_found(&request.uri)));
        };
        Some(self.forward_read(&gateway, &entry, &upstream, caller, request, ctx).await)
    }

    async fn forward_read(
        &self,
        gateway: &Arc<Gateway>,
        entry: &Arc<ServerEntry>,
        upstream: &str,
        caller: &Caller,
        request: &ReadResourceRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let round = RoundOf {
            method: "resources/read",
            name: &request.uri,
            arguments: None,
            input_responses: request.input_responses.as_ref(),
            request_state: request.request_state.as_deref(),
        };
        let caller = match self.with_round(caller, round, ctx).await {
            Ok(caller) => caller,
            Err(ended) => return ended.into_read(),
        };
        let params = ReadResourceRequestParams::new(upstream);
        let sent = Box::new(ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params)));
        let forwarded =
            Forwarded::Plain { request: sent, responses: request.input_responses.as_ref(), sent_over: None };
        let started = std::time::Instant::now();
        let (answer, outcome) = self.forward(gateway, entry, &forwarded, &caller, ctx).await;
        // The URI is left out of the audit: a template's values are the client's arguments.
        self.audit_call(entry, "resource=read", &caller, outcome, started.elapsed()).await;
        let done = match plain(entry, answer)? {
            Plain::InputRequired(result) => return Ok(ReadResourceResponse::InputRequired(*result)),
            Plain::Done(done) => *done,
        };
        match done {
            ServerResult::ReadResourceResult(mut result) => {
                // The contents name the server's URIs; the client knows them in the gateway's scheme.
                for contents in result.contents.iter_mut() {
                    let (ResourceContents::TextResourceContents { uri, .. }
                    | ResourceContents::BlobResourceContents { uri, .. }) = contents
                    else {
                        continue;
                    };
                    *uri = super::uri::wrap(&entry.row.name, uri);
                }
                Ok(result.into())
            }
            other => Err(unexpected(entry, &other)),
        }
    }

    /// For a 2026-07-28 request, the caller with its round (a retry's state checked first, a
    /// retry after the broker's browser link waiting for the user); a 2025-11-25 caller as it is.
    async fn with_round(
        &self,
        caller: &Caller,
        request: RoundOf<'_>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Caller, Ended> {
        let mut caller = caller.clone();
        if !caller.round_trips {
            return Ok(caller);
        }
        // Only the broker hands out states for a server's prompts and resources.
        if request.request_state.is_some_and(|s| !state::is_ours(s)) {
            return Err(Ended::Error(state::refused()));
        }
        let client = caller.user.client.key();
        let round = Round::open(
            &self.state.app,
            RoundRequest {
                user_id: &caller.user.user_id,
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
        caller.round = Some(Arc::new(round));
        match self.after_browser(&caller, request.name, ctx).await {
            Ok(None) => Ok(caller),
            Ok(Some(ended)) => Err(Ended::Answer(Box::new(Answer::Tool(ended.into())))),
            Err(Unfinished::Error(error)) => Err(Ended::Error(error)),
            Err(Unfinished::InputRequired(result)) => Err(Ended::InputRequired(result)),
        }
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
pub(super) enum Plain {
    Done(Box<ServerResult>),
    InputRequired(Box<rmcp::model::InputRequiredResult>),
}

/// What [`BrokerServer::forward`] answered, in a plain request's terms.
pub(super) fn plain(entry: &ServerEntry, answer: Result<Answer, Unfinished>) -> Result<Plain, ErrorData> {
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

pub(super) fn unexpected(entry: &ServerEntry, _result: &ServerResult) -> ErrorData {
    tracing::warn!(server = %entry.row.name, "a server behind the broker answered with another method's result");
    ErrorData::internal_error(format!("The server {} answered with an unexpected result.", entry.row.name), None)
}
