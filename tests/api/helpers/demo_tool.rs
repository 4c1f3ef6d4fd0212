//! An extension tool that acts at the demo provider, for the tests of what an extension may
//! have of a user's connection.

use std::sync::Arc;

use rmcp::model::CallToolResult;
use serde_json::json;

/// An extension tool that acts at the demo provider through `ExtensionContext::access_token`.
pub(crate) struct DemoTool;

impl oauth_broker::mcp::extension::Extension for DemoTool {
    fn tools(&self) -> Vec<rmcp::model::Tool> {
        let schema = serde_json::from_value(json!({"type": "object"})).unwrap();
        vec![rmcp::model::Tool::new("demo_account_name", "The demo account this client acts as.", Arc::new(schema))]
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        _arguments: Option<rmcp::model::JsonObject>,
        ctx: oauth_broker::mcp::extension::ExtensionContext,
    ) -> oauth_broker::mcp::extension::ExtensionFuture<'a, rmcp::model::CallToolResponse> {
        Box::pin(async move {
            if name != "demo_account_name" {
                return None;
            }
            Some(match ctx.access_token("demo", None, &["profile"]).await {
                // Never the token itself: only which grant it came from.
                Ok(token) => Ok(CallToolResult::success(vec![rmcp::model::ContentBlock::text(
                    token.grant.account_label.unwrap_or_default(),
                )])
                .into()),
                // -32042 or text in 2025-11-25, an InputRequiredResult in 2026-07-28.
                Err(unavailable) => unavailable.into_tool_response(),
            })
        })
    }
}
