//! How a failure inside an MCP request reaches the client: a bare `-32603 internal error`
//! (the cause is logged, never shown), unless the database is only away for a moment
//! ([`crate::store::unavailable`]) — then the client is told it may retry, and when.
//!
//! For a tool call that answer is a tool result with `isError`, its text saying to try again in
//! N seconds and `structuredContent` `{"error": "temporarily_unavailable", "retryAfter": N}`:
//! MCP server/tools §Error handling puts errors the model can act on in the result, and hosts
//! show a tool result to the model, which can wait and call again, while most end the turn on a
//! JSON-RPC error. Requests with no result to carry it (resources, prompts, completion) get the
//! JSON-RPC error with the same `data`, which a client can act on programmatically.
//!
//! A provider that cannot be reached gets the same treatment ([`provider_unavailable`]).

use rmcp::model::{CallToolResult, ContentBlock, ErrorCode, ErrorData};
use serde_json::json;

use crate::error_chain::Chain;
use crate::store::unavailable::{self, RETRY_AFTER_SECONDS};

const TEMPORARILY_UNAVAILABLE: &str = "temporarily_unavailable";
const PROVIDER_UNAVAILABLE: &str = "provider_unavailable";

/// A tool call the provider cannot serve now — a refresh failed transiently, or is held back
/// by its backoff or the per-minute attempt cap: an `isError` result saying when to
/// try again, with `structuredContent` `{"error": "provider_unavailable", "retryAfter": N}` in
/// the shape of [`database_unavailable`]. The connection is fine; no new consent is asked for.
pub fn provider_unavailable(
    provider: &crate::config::ProviderConfig,
    retry_after: std::time::Duration,
) -> CallToolResult {
    let seconds = retry_after.as_secs().max(1);
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!(
        "{} is not answering right now; try again in {seconds} seconds.",
        provider.display_name
    ))]);
    result.structured_content =
        Some(json!({"error": PROVIDER_UNAVAILABLE, "provider": provider.id.as_str(), "retryAfter": seconds}));
    result
}

/// The error for a failed request: retryable when the database is away, else internal.
pub fn internal(error: &(dyn std::error::Error + 'static), context: &'static str) -> ErrorData {
    if unavailable::is_unavailable(error) {
        tracing::warn!(error = %Chain(error), context, "database unavailable; the client is told to retry");
        return database_unavailable();
    }
    tracing::error!(error = %Chain(error), context, "request failed");
    ErrorData::internal_error("internal error", None)
}

/// A tool's failure: retryable when the database is away, else internal.
pub(crate) fn tool_failed(error: impl std::error::Error + 'static) -> ErrorData {
    internal(&error, "tool failed")
}

/// `-32603` whose message and `data` say to retry after [`RETRY_AFTER_SECONDS`].
pub fn database_unavailable() -> ErrorData {
    ErrorData::new(
        ErrorCode::INTERNAL_ERROR,
        format!("The broker's database is temporarily unavailable. Try again in {RETRY_AFTER_SECONDS} seconds."),
        Some(json!({"error": TEMPORARILY_UNAVAILABLE, "retryAfter": RETRY_AFTER_SECONDS})),
    )
}

/// A tool call's error: the retryable kind becomes an `isError` result the model reads;
/// anything else stays a JSON-RPC error.
pub fn into_tool_answer(error: ErrorData) -> Result<CallToolResult, ErrorData> {
    let retryable = error.code == ErrorCode::INTERNAL_ERROR
        && error.data.as_ref().and_then(|d| d.get("error")).and_then(|e| e.as_str()) == Some(TEMPORARILY_UNAVAILABLE);
    if !retryable {
        return Err(error);
    }
    let mut result = CallToolResult::error(vec![ContentBlock::text(error.message.to_string())]);
    result.structured_content = error.data;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreError;

    #[test]
    fn an_unreachable_database_becomes_a_retryable_tool_result_and_a_bug_stays_internal() {
        let away = internal(&StoreError::Database(sqlx::Error::PoolTimedOut), "test");
        let result = into_tool_answer(away).expect("a tool result");
        assert_eq!(result.is_error, Some(true));
        assert_eq!(result.structured_content, Some(json!({"error": "temporarily_unavailable", "retryAfter": 5})));

        let bug = internal(&StoreError::Corrupt("bad row".into()), "test");
        let error = into_tool_answer(bug).expect_err("stays a JSON-RPC error");
        assert_eq!(error.message, "internal error", "the cause is not shown");
    }
}
