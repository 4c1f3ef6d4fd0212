//! Tool results the broker's tools share: a text answer, and an `isError` one the model reads.

use rmcp::model::{CallToolResult, ContentBlock};

pub fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

pub fn error_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}
