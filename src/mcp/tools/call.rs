//! One `tools/call`, top to bottom: the arguments checked against the schema the client was
//! shown, a 2026-07-28 retry's state opened (one that does not fit changes nothing), a retry
//! after the broker's browser link waiting for the user, then the tool — one of the broker's
//! ([`BrokerTool`]: its arguments parsed once into its value, then run with the request's
//! [`Context`]), a server behind the broker's ([`crate::mcp::gateway::forward::tool_call`]), or
//! an extension's — and its failures as the client gets them ([`crate::mcp::failure`]).

use rmcp::model::{CallToolRequestParams, CallToolResponse, ErrorData, JsonObject};

use super::catalogue::{CONNECT_ACCOUNT, DISCONNECT_ACCOUNT, LIST_CONNECTIONS, PROVIDER_REQUEST, label, parse_args};
use super::connect_account::ConnectAccount;
use super::disconnect_account::DisconnectAccount;
use super::list_connections::ListConnections;
use super::provider_request::ProviderRequest;
use crate::mcp::browser_wait::after_browser;
use crate::mcp::context::Context;
use crate::mcp::extension::ExtensionContext;
use crate::mcp::failure::into_tool_answer;
use crate::mcp::gateway::forward::tool_call;
use crate::mcp::input_required::state::{is_ours, refused};
use crate::mcp::input_required::{Round, RoundRequest};
use crate::mcp::results::{Unfinished, error_result, finished};
use crate::mcp::state::McpState;

/// One of the broker's own tools, with its arguments.
pub enum BrokerTool {
    ListConnections(ListConnections),
    ConnectAccount(ConnectAccount),
    DisconnectAccount(DisconnectAccount),
    ProviderRequest(ProviderRequest),
}

impl BrokerTool {
    /// The broker's tool `name` with `arguments` parsed, or the text saying what is wrong with
    /// them; `None` when the broker has no tool of that name.
    pub fn parse(name: &str, arguments: Option<JsonObject>) -> Option<Result<Self, String>> {
        Some(match name {
            LIST_CONNECTIONS => Ok(BrokerTool::ListConnections(ListConnections)),
            CONNECT_ACCOUNT => parse_args(arguments).map(BrokerTool::ConnectAccount),
            DISCONNECT_ACCOUNT => parse_args(arguments).map(BrokerTool::DisconnectAccount),
            PROVIDER_REQUEST => parse_args(arguments).map(BrokerTool::ProviderRequest),
            _ => return None,
        })
    }

    // Each tool's future is boxed where it is awaited: they are kilobytes, and rmcp moves the
    // request's future more than once (see the note above `impl ServerHandler`).
    pub async fn run(self, cx: Context<'_>) -> Result<CallToolResponse, Unfinished> {
        let result = match self {
            BrokerTool::ListConnections(tool) => Ok(Box::pin(tool.run(cx)).await?),
            BrokerTool::ConnectAccount(tool) => Box::pin(tool.run(cx)).await,
            BrokerTool::DisconnectAccount(tool) => Box::pin(tool.run(cx)).await,
            BrokerTool::ProviderRequest(tool) => Box::pin(tool.run(cx)).await,
        };
        result.map(Into::into)
    }
}

/// `tools/call` for the caller of `cx`, with the MCP face's tools, extensions and servers behind
/// the broker (`mcp`).
pub async fn call(
    mcp: &McpState,
    cx: Context<'_>,
    request: CallToolRequestParams,
) -> Result<CallToolResponse, ErrorData> {
    // MCP server/tools: inputs are validated against the schema the client was shown (a
    // server behind the broker's tools: in `tool_call`).
    mcp.tools.check(&request.name, request.arguments.as_ref())?;
    // A `requestState` the broker did not make is an extension's own, for the extension to
    // read with the answers to its own requests; the broker's tools never hand one out.
    // After the broker's own link (a state of the broker's) the broker reads both.
    let ours = request.request_state.as_deref().is_some_and(is_ours);
    let foreign = request.request_state.is_some() && !ours;
    if foreign && label(&request.name) != "other" {
        return Err(refused());
    }
    let with_round;
    let cx = if cx.caller.round_trips {
        // A retry's state is checked before the tool runs: one that does not fit changes nothing.
        let client = cx.caller.user.client.key();
        let round = Box::pin(Round::open(
            cx.app,
            RoundRequest {
                user_id: &cx.caller.user.user_id,
                client: &client,
                method: "tools/call",
                name: &request.name,
                arguments: request.arguments.as_ref(),
                input_responses: request.input_responses.as_ref().filter(|_| ours),
                request_state: request.request_state.as_deref().filter(|_| ours),
            },
        ))
        .await?;
        with_round = cx.caller.with_round(round);
        cx.for_caller(&with_round)
    } else {
        cx
    };
    let outcome = match Box::pin(run(mcp, cx, request, !ours)).await {
        Err(Unfinished::Error(error)) => {
            into_tool_answer(error).map(CallToolResponse::Complete).map_err(Unfinished::Error)
        }
        other => other,
    };
    finished(outcome)
}

async fn run(
    mcp: &McpState,
    cx: Context<'_>,
    mut request: CallToolRequestParams,
    input_for_extension: bool,
) -> Result<CallToolResponse, Unfinished> {
    // MCP 2026-07-28: a retry after the broker's browser link waits for the user first.
    if cx.caller.round.is_some()
        && let Some(ended) = Box::pin(after_browser(cx, &request.name)).await?
    {
        return Ok(ended.into());
    }
    if label(&request.name) != "other" {
        match BrokerTool::parse(&request.name, request.arguments.take()) {
            Some(Ok(tool)) => return tool.run(cx).await,
            Some(Err(invalid)) => return Ok(error_result(invalid).into()),
            None => {}
        }
    }
    // A server behind the broker (gateway mode) serves this name.
    if let Some(answer) = Box::pin(tool_call::call(cx, &mcp.gateway, &request)).await {
        return answer;
    }
    let ext = match input_for_extension {
        true => ExtensionContext::of(cx).with_input(request.input_responses, request.request_state),
        false => ExtensionContext::of(cx),
    };
    for extension in mcp.extensions.iter() {
        if let Some(result) = extension.call_tool(&request.name, request.arguments.clone(), ext.clone()).await {
            return result.map_err(Unfinished::from);
        }
    }
    Err(ErrorData::invalid_params(format!("unknown tool: {}", request.name), None).into())
}
