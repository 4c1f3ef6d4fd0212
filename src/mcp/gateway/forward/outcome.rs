//! How a forwarded request ends for the client, and what is kept of it: the answer and its
//! outcome label from one attempt ([`settle`]), the retryable answer for a server that did not
//! answer ([`server_unavailable`]), and the audit entry and metric of every forwarded request
//! ([`audit`]: server, what, outcome, latency; never arguments, results or tokens).

use std::time::Duration;

use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, ErrorData};
use serde_json::json;

use super::credential::Instead;
use super::failure::Failure;
use super::forwarded::Answer;
use super::server_pages::relay_server_link;
use crate::mcp::context::Context;
use crate::mcp::gateway::catalogue::registry::ServerEntry;
use crate::mcp::results::{Unfinished, error_result};
use crate::store::audit::{Actor, AuditEvent, Outcome};

/// How long a client is told to wait before calling a server that did not answer again.
const RETRY_AFTER_SECONDS: u64 = 5;

/// The retryable answer for a server that did not answer: `isError`, naming it, with
/// `structuredContent` `{"error": "server_unavailable", "server", "retryAfter"}` in the shape
/// of the broker's other retryable answers (`crate::mcp::failure`).
pub fn server_unavailable(server: &str) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!(
        "The server {server} behind the broker is not answering right now; try again in {RETRY_AFTER_SECONDS} seconds."
    ))]);
    result.structured_content =
        Some(json!({"error": "server_unavailable", "server": server, "retryAfter": RETRY_AFTER_SECONDS}));
    result
}

/// The answer for the client and the outcome label of one attempt.
pub(crate) fn settle(
    cx: Context<'_>,
    entry: &ServerEntry,
    attempt: Result<Answer, Failure>,
) -> (Result<Answer, Unfinished>, &'static str) {
    match attempt {
        Ok(Answer::Tool(CallToolResponse::Complete(result))) if result.is_error == Some(true) => {
            (Ok(Answer::Tool(CallToolResponse::Complete(result))), "tool_error")
        }
        Ok(answer @ Answer::Tool(CallToolResponse::InputRequired(_))) => (Ok(answer), "needs_user"),
        Ok(Answer::Plain(Err(error))) => (Ok(Answer::Plain(Err(error))), "server_error"),
        Ok(answer) => (Ok(answer), "ok"),
        Err(Failure::Asked(round)) => (Ok(Answer::Tool(CallToolResponse::InputRequired(*round))), "needs_user"),
        // The server's own page, relayed in the client's era (super::server_pages).
        Err(Failure::ServerLink { error, questions }) => {
            let (answer, outcome) = relay_server_link(cx, entry, error, questions.as_ref());
            (answer.map(Answer::from), outcome)
        }
        Err(Failure::Unreachable) => {
            (Ok(Answer::Tool(server_unavailable(entry.row.name.as_str()).into())), "unreachable")
        }
        Err(Failure::Cancelled) => (Err(ErrorData::internal_error("the call was cancelled", None).into()), "cancelled"),
        // Only reached for servers without a user's token: nothing to refresh.
        Err(Failure::Unauthorized) => (
            Ok(Answer::Tool(
                error_result(format!("The server {} refused the broker's credential.", entry.row.name)).into(),
            )),
            "unauthorized",
        ),
    }
}

/// What the gates answered instead of the server, as an answer.
pub(crate) fn instead(answer: Instead) -> Result<Answer, Unfinished> {
    answer.map(Answer::from)
}

/// Audited on the batched queue (never a write per call on the request's path), counted.
/// `what` names what was forwarded (`tool=whoami`, `prompt=greeting`, `resource=read`).
pub(crate) async fn audit(cx: Context<'_>, entry: &ServerEntry, what: &str, outcome: &'static str, took: Duration) {
    crate::telemetry::gateway_call(entry.row.name.as_str(), outcome, took.as_secs_f64());
    let detail = format!("server={} {what} outcome={outcome} latency_ms={}", entry.row.name, took.as_millis());
    let provider = entry.row.auth.user_credential().map(|(provider, ..)| provider.as_str());
    let result = match outcome {
        "ok" | "tool_error" | "server_error" | "needs_user" => Outcome::Success,
        _ => Outcome::Failure,
    };
    let user_id = &cx.caller.user.user_id;
    let event = AuditEvent::new(Actor::User(user_id), "gateway.call", Some(user_id))
        .provider(provider)
        .detail(Some(&detail))
        .outcome(result);
    if let Err(error) = cx.core.store.audit_queue().record(cx.core.now(), event).await {
        tracing::warn!(error = %crate::error_chain::Chain(&error), "a forwarded call could not be audited");
    }
}
