//! `completion/complete` (stub: filled in by the prompts work).

use rmcp::model::{CompleteRequestParams, CompleteResult, CompletionInfo, ErrorData};

use crate::mcp::extension::ExtensionContext;
use crate::state::AppState;

pub async fn complete(
    _state: &AppState,
    _request: CompleteRequestParams,
    _ctx: ExtensionContext,
) -> Result<CompleteResult, ErrorData> {
    Ok(CompleteResult::new(CompletionInfo::default()))
}
