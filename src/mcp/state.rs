//! What the MCP face adds to the faces' [`AppState`]: its live sessions, the extensions, the
//! prompt and tool catalogues, and the servers behind the broker. Kept here, not in `AppState`,
//! so nothing below the faces (the core, identity, the store) can reach an MCP session or a
//! prompt. The core is `app.core`.

use std::sync::Arc;

use super::extension::Extensions;
use super::gateway::state::Gateway;
use super::prompts::PromptCatalogue;
use super::session::table::SessionTable;
use super::tools::catalogue;
use super::tools::schema::ToolCatalogue;
use super::transport::session_transport::ParkedCount;
use crate::state::AppState;

#[derive(Clone)]
pub struct McpState {
    pub app: AppState,
    /// The live MCP sessions: owner, protocol era, scope, liveness and transport of each.
    pub sessions: Arc<SessionTable>,
    /// How many sessions are parked (idle, without an rmcp service).
    pub parked: Arc<ParkedCount>,
    /// Tools, prompts and resources added through [`crate::app::AppBuilder::extension`].
    pub extensions: Extensions,
    /// The prompt catalogue (built-in, operator files, extensions).
    pub prompts: Arc<PromptCatalogue>,
    /// The tools served (built-in, then extensions'), with their schemas compiled once.
    pub tools: Arc<ToolCatalogue>,
    /// The MCP servers behind the broker, their tools, and this instance's connections to them.
    pub gateway: Arc<Gateway>,
}

impl McpState {
    /// The broker's tools, then each extension's that does not reuse a built-in name.
    pub fn tool_catalogue(app: &AppState, extensions: &Extensions) -> ToolCatalogue {
        let mut all = catalogue::tools(&app.core.providers.ids());
        let builtin: std::collections::HashSet<String> = all.iter().map(|t| t.name.to_string()).collect();
        for extension in extensions.iter() {
            all.extend(extension.tools().into_iter().filter(|t| !builtin.contains(t.name.as_ref())));
        }
        ToolCatalogue::new(all)
    }
}
