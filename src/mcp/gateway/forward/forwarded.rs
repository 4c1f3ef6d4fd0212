//! One request forwarded to a server behind the broker, as one value ([`Forward`]): the
//! request's context, the server it goes to, whose connection carries it, and what is sent —
//! handed down through every step of [`super::gates`], so each step's signature says what it
//! uses and none reaches back up for it.

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResponse, ClientRequest, ErrorData, InputResponses, ServerResult};

use crate::mcp::context::Context;
use crate::mcp::gateway::catalogue::registry::{ServerEntry, Target};
use crate::mcp::gateway::state::Gateway;
use crate::mcp::gateway::upstream::pool::{Upstream, UpstreamKey};

/// Where a plain request records the connection it was last sent over.
pub(crate) type SentOver = std::sync::Mutex<Option<Arc<Upstream>>>;

/// One forwarded request, from the gates down to the server and back.
pub(crate) struct Forward<'a> {
    /// The client's request: who calls, the session, rmcp's context, the core.
    pub cx: Context<'a>,
    pub gateway: &'a Arc<Gateway>,
    /// The server it goes to.
    pub entry: &'a Arc<ServerEntry>,
    /// Whose connection to that server carries it: the caller's own.
    pub key: UpstreamKey,
    pub what: Forwarded<'a>,
}

impl<'a> Forward<'a> {
    pub fn new(cx: Context<'a>, gateway: &'a Arc<Gateway>, entry: &'a Arc<ServerEntry>, what: Forwarded<'a>) -> Self {
        let key = gateway.pool.key(&cx.caller.user, entry);
        Self { cx, gateway, entry, key, what }
    }
}

/// What is forwarded: a tool call (with its progress, the server's questions and cancellation)
/// or one plain request (`prompts/get`, `resources/read`, `resources/subscribe`).
pub(crate) enum Forwarded<'a> {
    Tool {
        target: &'a Target,
        request: &'a CallToolRequestParams,
    },
    /// `request` as it goes to the server (its names the server's); `responses`: the client's
    /// `inputResponses`, of which a retry carries back only those the server asked for;
    /// `sent_over`, when given, is told the connection the request last went over (a
    /// subscription holds that very connection, not whichever the pool has by then).
    Plain {
        request: Box<ClientRequest>,
        responses: Option<&'a InputResponses>,
        sent_over: Option<&'a SentOver>,
    },
}

impl Forwarded<'_> {
    /// The client's `inputResponses` (MCP 2026-07-28), as it sent them.
    pub(crate) fn client_responses(&self) -> Option<&InputResponses> {
        match self {
            Forwarded::Tool { request, .. } => request.input_responses.as_ref(),
            Forwarded::Plain { responses, .. } => *responses,
        }
    }

    /// Where a plain request records the connection it went over.
    pub(crate) fn sent_over(&self) -> Option<&SentOver> {
        match self {
            Forwarded::Plain { sent_over, .. } => *sent_over,
            Forwarded::Tool { .. } => None,
        }
    }
}

/// The server's answer to what was forwarded, or the broker's own answer in a tool's shape
/// (a link to the broker's page, a retryable `isError`), which the faces of plain requests
/// translate ([`super::content`]).
pub(crate) enum Answer {
    Tool(CallToolResponse),
    /// The server's result, or the JSON-RPC error it answered with (passed on as it came).
    Plain(Result<ServerResult, ErrorData>),
}

impl From<CallToolResponse> for Answer {
    fn from(response: CallToolResponse) -> Self {
        Self::Tool(response)
    }
}
