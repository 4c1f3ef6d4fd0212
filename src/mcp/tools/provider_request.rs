//! `provider_request`: a call to a provider's API with the user's token injected, as one of
//! the user's accounts there (named, the only one, or chosen: see [`super::accounts`]).
//! The call itself is [`crate::broker::provider_call`]'s; this face picks the account, gets the
//! token through the core's access decision, and turns the answer into a tool result.

use std::collections::BTreeMap;

use rmcp::model::{CallToolResult, ContentBlock};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::accounts::{AccountPick, pick_account};
use super::catalogue::{PROVIDER_REQUEST, unknown_provider};
use crate::broker::provider_call::{self, ApiMethod, ApiRequest, Body, CallError, ProviderAnswer, Query};
use crate::domain::Scopes;
use crate::mcp::access::token_for_tool;
use crate::mcp::context::Context;
use crate::mcp::failure::tool_failed;
use crate::mcp::forms::questions::account_name;
use crate::mcp::logging::LogLevel;
use crate::mcp::results::{Unfinished, error_result};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderRequest {
    pub provider: String,
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub query: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub body: Option<Value>,
    #[serde(default)]
    pub account: Option<String>,
}

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

impl ProviderRequest {
    pub async fn run(self, cx: Context<'_>) -> Result<CallToolResult, Unfinished> {
        let args = self;
        let Some(provider) = cx.core.providers.find(&args.provider) else {
            return Ok(error_result(unknown_provider(&cx.core.providers.ids(), &args.provider)));
        };
        // Checked before an account is picked or a token read: a refused request costs nothing.
        let query = args.query.as_ref().map_or(Query::None, Query::Values);
        let checked = ApiMethod::parse(&args.method).and_then(|method| {
            ApiRequest::new(&provider, method, &args.path, query, args.body.as_ref().map(Body::Json))
        });
        let request = match checked {
            Ok(request) => request.accepting(Some("application/json")),
            Err(e) => return Ok(error_result(e.to_string())),
        };
        let account = match pick_account(cx, &provider, args.account.as_deref(), PROVIDER_REQUEST).await? {
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
            let token = match token_for_tool(cx, &provider, account.as_deref(), &Scopes::default()).await {
                Ok(token) => token,
                Err(answer) => return answer,
            };
            let answer = tokio::select! {
                // MCP cancellation: a cancelled call stops its upstream request.
                _ = cx.request.ct.cancelled() => return Ok(error_result("Cancelled.")),
                answer = provider_call::call(cx.core, &provider, &request, token) => answer,
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
        cx.log(level, logged).await;
        let failed = answer.status >= 400;
        let structured = serde_json::to_value(ToolAnswer::from(answer)).map_err(tool_failed)?;
        let mut result = CallToolResult::structured(structured.clone());
        result.content = vec![ContentBlock::text(structured.to_string())];
        // Provider-side failures are results the model should read, not protocol errors.
        result.is_error = Some(failed);
        Ok(result)
    }
}
