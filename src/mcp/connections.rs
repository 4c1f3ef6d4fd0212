//! `list_connections` and `disconnect_account`.

use rmcp::model::{CallToolResult, ContentBlock, ErrorData};
use serde_json::json;

use super::server::{BrokerServer, Caller, error_result, text_result};
use super::tools::DisconnectArgs;
use crate::store::grants::GrantStatus;

pub(crate) fn internal(error: impl std::fmt::Display) -> ErrorData {
    tracing::error!(%error, "tool failed");
    ErrorData::internal_error("internal error", None)
}

impl BrokerServer {
    pub(crate) async fn list_connections(&self, caller: &Caller) -> Result<CallToolResult, ErrorData> {
        let grants = self.state.store.grants_for_user(&caller.user.user_id).await.map_err(internal)?;
        let connections: Vec<_> = self
            .state
            .providers
            .iter()
            .map(|provider| {
                let grant = grants.iter().find(|g| g.provider == provider.id.as_str());
                let status = match grant {
                    Some(g) if g.status == GrantStatus::Active.as_str() => "connected",
                    Some(_) => "needs_reconsent",
                    None => "not_connected",
                };
                json!({
                    "provider": provider.id.as_str(),
                    "display_name": provider.display_name,
                    "connected": status == "connected",
                    "status": status,
                    "account": grant.and_then(|g| g.account_label.clone()),
                    "scopes": grant.map(|g| g.scopes.split_whitespace().collect::<Vec<_>>()).unwrap_or_default(),
                    "expires_at": grant.and_then(|g| g.expires_at),
                })
            })
            .collect();
        let structured = json!({ "connections": connections });
        let mut result = CallToolResult::structured(structured.clone());
        // Also as text, for clients that only show content (MCP server/tools §structured content).
        result.content = vec![ContentBlock::text(structured.to_string())];
        Ok(result)
    }

    pub(crate) async fn disconnect_account(
        &self,
        caller: &Caller,
        args: DisconnectArgs,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(provider) = self.state.providers.find(&args.provider) else {
            return Ok(error_result(unknown_provider(&self.state.providers.ids(), &args.provider)));
        };
        match crate::oauth::tokens::disconnect(&self.state, &caller.user.user_id, provider).await {
            Ok(true) => Ok(text_result(format!(
                "Disconnected from {}; its tokens were revoked and deleted.",
                provider.display_name
            ))),
            Ok(false) => Ok(text_result(format!("You were not connected to {}.", provider.display_name))),
            Err(e) => Err(internal(e)),
        }
    }
}

pub(crate) fn unknown_provider(known: &[String], asked: &str) -> String {
    let shown: String = asked.chars().take(64).collect();
    format!("Unknown provider {shown:?}. Known providers: {}.", known.join(", "))
}
