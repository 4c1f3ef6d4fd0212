//! One attempt at what is forwarded, over the user's own connection to the server: the
//! connection (opened on first use in the revision the server speaks, carrying `credential`
//! from now on), the request sent and waited on ([`super::in_flight`]), and its end as the gates
//! take it — the server's result, a JSON-RPC error passed on, a `-32042`
//! ([`Failure::ServerLink`]), a refused credential ([`Failure::Unauthorized`]) or a server that
//! is down ([`Failure::Unreachable`], the connection dropped so the next call opens another).
//!
//! A tool call is one `tools/call` ([`tool`]); a plain request one request ([`plain`]) —
//! stateless to a 2026-07-28 server, as a call is; a `resources/subscribe` to such a server a
//! listen of the broker's ([`super::upstream_listen`]). A 2026-07-28 client's retry after a
//! server's mid-request question takes its flight back instead ([`resumed`]).

use std::sync::Arc;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest, ContentBlock,
};
use rmcp::service::ServiceError;
use serde_json::json;

use super::failure::{Failure, server_error, server_error_result};
use super::forwarded::{Answer, Forward, Forwarded};
use super::in_flight::{Landing, fly, resume, send_upstream};
use super::upstream_listen::listen_upstream;
use crate::mcp::context::Context;
use crate::mcp::elicitation::URL_ELICITATION_REQUIRED;
use crate::mcp::gateway::catalogue::registry::{ServerEntry, Target};
use crate::mcp::gateway::state::Gateway;
use crate::mcp::gateway::upstream::credential::{Credential, CredentialCell, unauthorized};
use crate::mcp::gateway::upstream::pool::{Upstream, UpstreamKey};
use crate::mcp::gateway::upstream::revision::Revision;
use crate::mcp::results::error_result;

/// What an expired question's answer tells the client of a tool call to do.
const CALL_AGAIN: &str = "call the tool again";

/// What an expired question's answer tells the client of a plain request to do.
const SEND_AGAIN: &str = "send the request again";

/// The user's connection to the server (opened if there is none), carrying `credential` from
/// now on.
pub(crate) async fn open_upstream(
    cx: Context<'_>,
    gateway: &Arc<Gateway>,
    entry: &Arc<ServerEntry>,
    key: &UpstreamKey,
    credential: Option<Credential>,
) -> Result<Arc<Upstream>, Failure> {
    let limit = cx.core.config.gateway.call_timeout;
    let open = {
        let credential = credential.clone();
        move || {
            let cell = Arc::new(CredentialCell::default());
            cell.set(credential);
            gateway.open(entry, cell, Some(&cx.caller.user.user_id))
        }
    };
    let opened = tokio::select! {
        _ = cx.request.ct.cancelled() => return Err(Failure::Cancelled),
        opened = tokio::time::timeout(limit, gateway.pool.get_or_open(key, open)) => opened,
    };
    let connection = match opened {
        Ok(Ok(connection)) => connection,
        Ok(Err(error)) if unauthorized(&error) => return Err(Failure::Unauthorized),
        Ok(Err(error)) => {
            tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "could not connect to a server behind the broker");
            return Err(Failure::Unreachable);
        }
        Err(_) => {
            tracing::warn!(server = %entry.row.name, "a server behind the broker did not answer in time to connect");
            return Err(Failure::Unreachable);
        }
    };
    connection.credential.set(credential);
    // Lists taken from the database (another instance's read, or an earlier start's): read once
    // by this process too, beside the call (`catalogue::shared_lists`). Unknown lists are read
    // by the connect tool instead.
    if entry.tools().is_some() && entry.claim_first_read() {
        let (gateway, entry, peer) = (gateway.clone(), entry.clone(), connection.service.peer().clone());
        tokio::spawn(async move {
            if gateway.fill_tools(&entry, &peer).await {
                gateway.fill_lists(&entry, &peer).await;
            } else {
                entry.read_failed();
            }
        });
    }
    Ok(connection)
}

/// One try of a tool call: the user's connection with `credential`, then the call as it goes
/// to the server (`params`: the server's tool name, with what a retry carries back).
pub(crate) async fn tool(
    forward: &Forward<'_>,
    target: &Target,
    params: CallToolRequestParams,
    credential: Option<Credential>,
) -> Result<CallToolResponse, Failure> {
    let (gateway, entry) = (forward.gateway, forward.entry);
    let connection = open_upstream(forward.cx, gateway, entry, &forward.key, credential).await?;
    let limit = forward.cx.core.config.gateway.call_timeout;
    let peer = connection.service.peer();
    let tool = match target {
        Target::Connect => {
            if !gateway.fill_tools(entry, peer).await {
                gateway.pool.forget(&forward.key, &connection);
                return Err(Failure::Unreachable);
            }
            gateway.fill_lists(entry, peer).await;
            let names = entry.tools().map(|t| t.names()).unwrap_or_default();
            let text = format!("Connected to {}. Its tools: {}.", entry.row.name, names.join(", "));
            let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
            result.structured_content = Some(json!({"server": entry.row.name.as_str(), "tools": names}));
            return Ok(result.into());
        }
        Target::Tool(tool) => tool.clone(),
    };
    let mut sent = CallToolRequestParams::new(tool);
    sent.arguments = params.arguments;
    sent.input_responses = params.input_responses;
    sent.request_state = params.request_state;
    let call = ClientRequest::CallToolRequest(CallToolRequest::new(sent));
    // The call's progress, the server's questions within it, its log messages, its timeout and
    // cancellation (super::in_flight).
    let call = match send_upstream(forward, &connection, call, limit).await {
        Ok(call) => call,
        Err(error) => {
            tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "a call to a server behind the broker could not be sent");
            gateway.pool.forget(&forward.key, &connection);
            return Err(Failure::Unreachable);
        }
    };
    let landing = fly(forward, call).await?;
    tool_landing(forward, landing)
}

/// One plain request over the user's connection with `credential`, within
/// `gateway.call_timeout` (not counting the time the user takes to answer the server's
/// questions, relayed as a tool call's are); cancelled upstream when the client cancels. The
/// server's JSON-RPC error comes back as an answer — its code and message, with `data` naming
/// the server ([`server_error`]) — except a `-32042`, which the gates decide on; a 2026-07-28
/// server's `InputRequiredResult` comes back as its result, for [`super::rounds`] to relay.
pub(crate) async fn plain(
    forward: &Forward<'_>,
    request: ClientRequest,
    credential: Option<Credential>,
) -> Result<Answer, Failure> {
    let (gateway, entry) = (forward.gateway, forward.entry);
    let connection = open_upstream(forward.cx, gateway, entry, &forward.key, credential).await?;
    // A stateless 2026-07-28 server has no `resources/subscribe`: a listen instead.
    if let ClientRequest::SubscribeRequest(subscribe) = &request
        && entry.revision.get() == Some(Revision::Stateless)
    {
        return listen_upstream(forward, &connection, &subscribe.params.uri).await;
    }
    let limit = gateway.app.core.config.gateway.call_timeout;
    let request = match send_upstream(forward, &connection, request, limit).await {
        Ok(request) => request,
        Err(error) => {
            tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "a request to a server behind the broker could not be sent");
            gateway.pool.forget(&forward.key, &connection);
            return Err(Failure::Unreachable);
        }
    };
    let landing = fly(forward, request).await?;
    plain_landing(forward, landing)
}

/// A retry that answers a server's question asked mid-request: the request is still waiting
/// (its state is bound to this very method, name and arguments).
pub(crate) async fn resumed(forward: &Forward<'_>) -> Result<Answer, Failure> {
    match forward.what {
        Forwarded::Tool { .. } => {
            let landing = resume(forward, CALL_AGAIN).await?;
            tool_landing(forward, landing).map(Answer::Tool)
        }
        Forwarded::Plain { .. } => {
            let landing = resume(forward, SEND_AGAIN).await?;
            plain_landing(forward, landing)
        }
    }
}

/// A forwarded tool call's end, as the gates take it.
fn tool_landing(forward: &Forward<'_>, landing: Landing) -> Result<CallToolResponse, Failure> {
    let (connection, answer) = match landing {
        Landing::Answered { connection, answer } => (connection, answer),
        Landing::Broker(result) => return Ok(result.into()),
    };
    let entry = forward.entry;
    let answer = answer.map(|result| match result {
        rmcp::model::ServerResult::CallToolResult(result) => CallToolResponse::Complete(result),
        // MCP 2026-07-28: the server needs the user first (super::rounds).
        rmcp::model::ServerResult::InputRequiredResult(asked) => CallToolResponse::InputRequired(asked),
        _ => CallToolResponse::Complete(error_result(format!(
            "The server {} started a task, which the broker does not relay yet.",
            entry.row.name
        ))),
    });
    match answer {
        Ok(response) => Ok(response),
        Err(ServiceError::McpError(error)) if error.code == URL_ELICITATION_REQUIRED => {
            let questions = Some(connection.service.service().questions.clone());
            Err(Failure::ServerLink { error, questions })
        }
        Err(ServiceError::McpError(error)) => Ok(server_error_result(entry, error)),
        Err(error) if unauthorized(&error) => Err(Failure::Unauthorized),
        Err(error) => {
            tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "a call to a server behind the broker failed");
            forward.gateway.pool.forget(&forward.key, &connection);
            Err(Failure::Unreachable)
        }
    }
}

/// A plain request's end: the server's result or JSON-RPC error, or the broker's own answer in
/// a tool's shape. The request's `sent_over`, when given, is told the connection the server
/// answered on.
fn plain_landing(forward: &Forward<'_>, landing: Landing) -> Result<Answer, Failure> {
    let (connection, answer) = match landing {
        Landing::Answered { connection, answer } => (connection, answer),
        Landing::Broker(result) => return Ok(Answer::Tool(result.into())),
    };
    let entry = forward.entry;
    let answer = match answer {
        Ok(result) => Ok(result),
        Err(ServiceError::McpError(error)) if error.code == URL_ELICITATION_REQUIRED => {
            let questions = Some(connection.service.service().questions.clone());
            return Err(Failure::ServerLink { error, questions });
        }
        Err(ServiceError::McpError(error)) => Err(server_error(entry, error)),
        Err(error) if unauthorized(&error) => return Err(Failure::Unauthorized),
        Err(error) => {
            tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "a request to a server behind the broker failed");
            forward.gateway.pool.forget(&forward.key, &connection);
            return Err(Failure::Unreachable);
        }
    };
    if let Some(sent_over) = forward.what.sent_over() {
        *sent_over.lock().unwrap_or_else(|p| p.into_inner()) = Some(connection);
    }
    Ok(Answer::Plain(answer))
}
