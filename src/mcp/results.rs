//! Tool results the broker's tools share: a text answer, an `isError` one the model reads,
//! [`Unfinished`] (a tool's way out when there is no result yet), and the `resultType` every
//! finished result carries.

use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, ErrorData, GetPromptResponse, InputRequiredResult,
    ReadResourceResponse, ResultType,
};

pub fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

pub fn error_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// Why a tool call ends without a result: a JSON-RPC error, or (MCP 2026-07-28) the user must
/// answer first and the client retries ([`crate::mcp::input_required`]). `?` turns an
/// [`ErrorData`] into the first, so tools keep returning `Result<CallToolResult, Unfinished>`.
#[derive(Debug)]
pub enum Unfinished {
    Error(ErrorData),
    InputRequired(Box<InputRequiredResult>),
}

impl From<ErrorData> for Unfinished {
    fn from(error: ErrorData) -> Self {
        Self::Error(error)
    }
}

impl From<InputRequiredResult> for Unfinished {
    fn from(result: InputRequiredResult) -> Self {
        Self::InputRequired(Box::new(result))
    }
}

/// A tool's outcome as the protocol carries it: an input request is an answer, not an error.
pub fn finished(outcome: Result<CallToolResponse, Unfinished>) -> Result<CallToolResponse, ErrorData> {
    match outcome {
        Ok(response) => Ok(response),
        Err(Unfinished::InputRequired(result)) => Ok(CallToolResponse::InputRequired(*result)),
        Err(Unfinished::Error(error)) => Err(error),
    }
}

// MCP 2026-07-28 basic (SEP-2322): every result says what it is, `"complete"` for a finished
// one. rmcp's constructors set it, but a result built from JSON (the extension fixtures, the
// prompt files) has none; rmcp drops `"complete"` again for older revisions, so setting it
// here changes nothing for 2025-11-25 sessions.

/// What `tools/call` answers: `response` with `resultType: "complete"` when it is finished and
/// names no type. A task (which an extension might build) is refused: the broker offers no
/// tasks (`tasks/get` would not find it).
pub fn tool_answer(response: CallToolResponse) -> Result<CallToolResponse, ErrorData> {
    match response {
        CallToolResponse::Complete(mut result) => {
            result.result_type.get_or_insert(ResultType::COMPLETE);
            Ok(CallToolResponse::Complete(result))
        }
        CallToolResponse::InputRequired(result) => Ok(CallToolResponse::InputRequired(result)),
        _ => {
            tracing::error!("a tool answered with a task, which this server does not offer");
            Err(ErrorData::internal_error("the tool answered with a task, which this server does not offer", None))
        }
    }
}

/// [`tool_answer`]'s `resultType` for `prompts/get`.
pub fn prompt_complete(response: GetPromptResponse) -> GetPromptResponse {
    match response {
        GetPromptResponse::Complete(mut result) => {
            result.result_type.get_or_insert(ResultType::COMPLETE);
            GetPromptResponse::Complete(result)
        }
        other => other,
    }
}

/// [`tool_answer`]'s `resultType` for `resources/read`.
pub fn resource_complete(response: ReadResourceResponse) -> ReadResourceResponse {
    match response {
        ReadResourceResponse::Complete(mut result) => {
            result.result_type.get_or_insert(ResultType::COMPLETE);
            ReadResourceResponse::Complete(result)
        }
        other => other,
    }
}
