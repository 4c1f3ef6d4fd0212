//! `tools/call` of a name a server behind the broker serves: the server and its tool resolved,
//! the arguments checked against the schema the client was shown (`-32602` naming the field
//! otherwise, as for the broker's own tools), the call through the gates ([`super::gates`]),
//! audited and counted.

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{CallToolRequestParams, CallToolResponse, ErrorData};

use super::forwarded::{Answer, Forward, Forwarded};
use super::gates;
use super::outcome::audit;
use crate::mcp::context::Context;
use crate::mcp::gateway::catalogue::registry::{CONNECT_TOOL, Target};
use crate::mcp::gateway::state::Gateway;
use crate::mcp::results::Unfinished;

/// The server's answer to `request`; `None` if no server behind the broker serves its name.
pub(crate) async fn call(
    cx: Context<'_>,
    gateway: &Arc<Gateway>,
    request: &CallToolRequestParams,
) -> Option<Result<CallToolResponse, Unfinished>> {
    let (entry, target) = gateway.resolve(&request.name)?;
    if let Err(error) = gateway.check(&entry, &request.name, request.arguments.as_ref()) {
        return Some(Err(error.into()));
    }
    let started = Instant::now();
    let forward = Forward::new(cx, gateway, &entry, Forwarded::Tool { target: &target, request });
    let (answer, outcome) = gates::pass(&forward).await;
    let tool = match &target {
        Target::Tool(name) => name.as_str(),
        Target::Connect => CONNECT_TOOL,
    };
    audit(cx, &entry, &format!("tool={tool}"), outcome, started.elapsed()).await;
    Some(answer.and_then(|answer| match answer {
        Answer::Tool(response) => Ok(response),
        Answer::Plain(_) => Err(ErrorData::internal_error("a tool call got another request's answer", None).into()),
    }))
}
