//! The prompt catalogue (stub: filled in by the prompts work).

use rmcp::model::{ErrorData, GetPromptResult, JsonObject, ListPromptsResult};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::events::Events;
use crate::mcp::extension::{ExtensionContext, Extensions};
use crate::state::AppState;

#[derive(Debug, Default)]
pub struct PromptCatalogue {}

impl PromptCatalogue {
    pub fn empty() -> Self {
        Self::default()
    }

    pub fn new(_config: &Config, _extensions: Extensions, _events: Events) -> Self {
        Self::default()
    }

    pub fn start_watching(&self, _shutdown: CancellationToken) {}

    pub fn list(&self, _cursor: Option<&str>) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(Vec::new()))
    }

    pub async fn get(
        &self,
        _state: &AppState,
        name: &str,
        _arguments: Option<JsonObject>,
        _ctx: ExtensionContext,
    ) -> Result<GetPromptResult, ErrorData> {
        Err(ErrorData::invalid_params(format!("unknown prompt: {name}"), None))
    }
}
