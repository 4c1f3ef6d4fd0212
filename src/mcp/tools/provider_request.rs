//! `provider_request`: a call to a provider's API with the user's token injected, as one of
//! the user's accounts there (named, the only one, or chosen: see [`BrokerServer::pick_account`]).
//! The call itself is [`crate::broker::provider_call`]'s; this face picks the account, gets the
//! token through the core's access decision, and turns the answer into a tool result.

use std::collections::BTreeMap;

use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use serde::Serialize;

use crate::broker::provider_call::{self, ApiMethod, Body, CallError, ProviderAnswer, ProviderRequest, Query};
use crate::domain::Scopes;
use crate::mcp::forms::questions::account_name;
use crate::mcp::handler::{BrokerServer, Caller};
use crate::mcp::logging::LogLevel;
use crate::mcp::results::{Unfinished, error_result};
use crate::mcp::tools::connections::AccountPick;
use crate::mcp::tools::failure::tool_failed;
use crate::mcp::tools::{PROVIDER_REQUEST, ProviderRequestArgs, unknown_provider};

/// The tool's structured result.
#[derive(Serialize)]
struct ToolAnswer {
    status: u16,
    headers: BTreeMap<String, String>,
    /// Parsed JSON when the provider sent JSON (and all of it), else the text.
    body: serde_json::Value,
    truncated: bool,
}

impl From<ProviderAnswer> for ToolAnswer {
    fn from(answer: ProviderAnswer) -> Self {
        let is_json = answer.headers.get("content-type").is_some_and(|ct| ct.contains("json"));
        let body = if is_json && !answer.truncated {
            serde_json::from_str(&answer.body).unwrap_or(serde_json::Value::String(answer.body))
        } else {
            serde_json::Value::String(answer.body)
        };
        ToolAnswer { status: answer.status, headers: answer.headers, body, truncated: answer.truncated }
    }
}

impl BrokerServer {
    pub(crate) async fn provider_request(
        &self,
        caller: &Caller,
        args: ProviderRequestArgs,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, Unfinished> {
        let Some(provider) = self.state.app.core.providers.find(&args.provider) else {
            return Ok(error_result(unknown_provider(&self.state.app.core.providers.ids(), &args.provider)));
        };
        // Checked before an account is picked or a token read: a refused request costs nothing.
        let query = args.query.as_ref().map_or(Query::None, Query::Values);
        let checked = ApiMethod::parse(&args.method).and_then(|method| {
            ProviderRequest::new(&provider, method, &args.path, query, args.body.as_ref().map(Body::Json))
        });
        let request = match checked {
            Ok(request) => request.accepting(Some("application/json")),
            Err(e) => return Ok(error_result(e.to_string())),
        };
        let account = match self.pick_account(caller, &provider, args.account.as_deref(), PROVIDER_REQUEST, ctx).await?
        {
            AccountPick::One(grant) => Some(account_name(&grant).to_owned()),
            AccountPick::NoAccount => None,
            AccountPick::Answer(result) => return Ok(result),
        };
        // Any grant will do: which scopes an API path needs is the provider's business, and
        // its 403 is returned as is. The client must be allowed to use the connection (consent
        // per client) before its token is used, or even refreshed, on its behalf.
        // The provider may refuse the token and then its refresh: the grant is then
        // marked for a new consent, and the core's decision, asked again, is the reconnect link
        // (`-32042`, URL elicitation or `input_required` by era) instead of the provider's 401.
        let mut attempts = 0;
        let answer = loop {
            let token = match self.token_for_tool(caller, &provider, account.as_deref(), &Scopes::default()).await {
                Ok(token) => token,
                Err(answer) => return answer,
            };
            let answer = tokio::select! {
                // MCP cancellation: a cancelled call stops its upstream request.
                _ = ctx.ct.cancelled() => return Ok(error_result("Cancelled.")),
                answer = provider_call::call(&self.state.app.core, &provider, &request, token) => answer,
            };
            match answer {
                Ok(answer) => break answer,
                Err(CallError::Request(e)) => return Ok(error_result(e.to_string())),
                Err(CallError::Unreachable(e)) => return Ok(error_result(format!("{}: {e}", provider.display_name))),
                Err(CallError::Store(e)) => return Err(tool_failed(e).into()),
                Err(CallError::NeedsReconsent) if attempts == 0 => attempts += 1,
                Err(CallError::NeedsReconsent) => {
                    return Ok(error_result(format!(
                        "{} refused the connection again; call provider_request again to reconnect.",
                        provider.display_name
                    )));
                }
            }
        };
        // MCP utilities/logging: what was called and how it went; never the token.
        let level = if answer.status >= 400 { LogLevel::Warning } else { LogLevel::Info };
        let logged = serde_json::json!({"provider": provider.id.as_str(), "method": request.method().as_str(), "path": args.path, "status": answer.status});
        self.log(ctx, level, logged).await;
        let failed = answer.status >= 400;
        let structured = serde_json::to_value(ToolAnswer::from(answer)).map_err(tool_failed)?;
        let mut result = CallToolResult::structured(structured.clone());
        result.content = vec![ContentBlock::text(structured.to_string())];
        // Provider-side failures are results the model should read, not protocol errors.
        result.is_error = Some(failed);
        Ok(result)
    }
}
