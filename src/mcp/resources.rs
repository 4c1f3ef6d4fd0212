//! Resources (stub: filled in by the resources work).

use rmcp::model::{ErrorData, ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult};

use crate::mcp::extension::ExtensionContext;
use crate::state::AppState;

pub async fn list(
    _state: &AppState,
    _ctx: &ExtensionContext,
    _cursor: Option<&str>,
) -> Result<ListResourcesResult, ErrorData> {
    Ok(ListResourcesResult::with_all_items(Vec::new()))
}

pub async fn templates(
    _state: &AppState,
    _ctx: &ExtensionContext,
    _cursor: Option<&str>,
) -> Result<ListResourceTemplatesResult, ErrorData> {
    Ok(ListResourceTemplatesResult::with_all_items(Vec::new()))
}

pub async fn read(_state: &AppState, _ctx: ExtensionContext, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    Err(ErrorData::resource_not_found(format!("unknown resource: {uri}"), None))
}

/// Whether `uri` names a resource this user may subscribe to.
pub async fn exists(_state: &AppState, _ctx: &ExtensionContext, _uri: &str) -> bool {
    false
}
