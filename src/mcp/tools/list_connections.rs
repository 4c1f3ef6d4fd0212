//! `list_connections`: the providers this broker connects to and, for each, whether the user is
//! connected, with which accounts and scopes, and whether this client may use each connection
//! yet — the core's one listing of a user's connections ([`crate::broker::connections`]), as
//! structured content.

use rmcp::model::{CallToolResult, ErrorData};
use serde_json::json;

use crate::broker::connections::{self, ConnectionStatus};
use crate::mcp::context::Context;
use crate::mcp::failure::tool_failed;

/// `list_connections` takes no arguments.
pub struct ListConnections;

impl ListConnections {
    pub async fn run(self, cx: Context<'_>) -> Result<CallToolResult, ErrorData> {
        let user = &cx.caller.user;
        let listing =
            connections::connections(cx.core, &user.user_id, Some(&user.client)).await.map_err(tool_failed)?;
        // Providers no longer configured are not offered to tools.
        let entries: Vec<_> = listing
            .iter()
            .filter_map(|c| {
                let provider = c.provider.as_deref()?;
                let grant = c.grant.as_ref();
                Some(json!({
                    "provider": provider.id.as_str(),
                    "display_name": provider.display_name,
                    "connected": c.status == ConnectionStatus::Connected,
                    "status": c.status.as_str(),
                    "account": grant.and_then(|g| g.account_label.clone()),
                    "scopes": grant.map(|g| g.scopes.iter().collect::<Vec<_>>()).unwrap_or_default(),
                    "expires_at": grant.and_then(|g| g.expires_at),
                    "allowed_for_this_client": c.allowed_for_client,
                    "state": c.state.code(),
                    "last_refresh_error": c.state.last_error().map(|e| e.as_str()),
                    "next_refresh_at": c.state.retry_at(),
                }))
            })
            .collect();
        // `structured` also puts the same JSON in a text block, for clients that only show
        // content (MCP server/tools §structured content).
        Ok(CallToolResult::structured(json!({ "connections": entries })))
    }
}
