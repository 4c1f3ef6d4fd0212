//! Tool results the broker's tools share: a text answer, an `isError` one the model reads, and
//! [`Unfinished`], a tool's way out when there is no result (yet).

use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, ErrorData, InputRequiredResult};

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

/// A tool's outcome as the protocol carries it.
pub fn tool_response(outcome: Result<CallToolResult, Unfinished>) -> Result<CallToolResponse, ErrorData> {
    match outcome {
        Ok(result) => Ok(CallToolResponse::Complete(result)),
        Err(Unfinished::InputRequired(result)) => Ok(CallToolResponse::InputRequired(*result)),
        Err(Unfinished::Error(error)) => Err(error),
    }
}
