//! `provider_request`: a call to a provider's API with the user's token injected, as one of
//! the user's accounts there (named, the only one, or chosen: see [`BrokerServer::pick_account`]).

use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ContentBlock, ErrorData};
use rmcp::service::RequestContext;

use super::connections::{AccountPick, internal, unknown_provider};
use super::forms::questions::account_name;
use super::server::{BrokerServer, Caller, LogLevel, error_result};
use super::tools::{PROVIDER_REQUEST, ProviderRequestArgs};
use crate::domain::Scopes;
use crate::oauth::api;

impl BrokerServer {
    pub(crate) async fn provider_request(
        &self,
        caller: &Caller,
        args: ProviderRequestArgs,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(provider) = self.state.providers.find(&args.provider) else {
            return Ok(error_result(unknown_provider(&self.state.providers.ids(), &args.provider)));
        };
        let method = match api::parse_method(&args.method) {
            Ok(m) => m,
            Err(e) => return Ok(error_result(e.to_string())),
        };
        let mut url = match api::resolve_path(&provider.api_base_url, &args.path) {
            Ok(u) => u,
            Err(e) => return Ok(error_result(e.to_string())),
        };
        if let Err(e) = api::apply_query(&mut url, args.query.as_ref()) {
            return Ok(error_result(e.to_string()));
        }
        let account = match self.pick_account(caller, provider, args.account.as_deref(), PROVIDER_REQUEST, ctx).await? {
            AccountPick::One(grant) => Some(account_name(&grant).to_owned()),
            AccountPick::NoAccount => None,
            AccountPick::Answer(result) => return Ok(result),
        };
        // Any grant will do: which scopes an API path needs is the provider's business, and
        // its 403 is returned as is. The client must be allowed to use the connection (consent
        // per client) before its token is used, or even refreshed, on its behalf.
        let token = match self.token_for_tool(caller, provider, account.as_deref(), &Scopes::default()).await {
            Ok(token) => token,
            Err(answer) => return answer,
        };
        // A provider that names each grant's API base with its token (Salesforce instance_url):
        // the path is resolved under that grant's base instead, with the same checks.
        if provider.api_base_from_token.is_some()
            && let Some((_, Some(base))) = self.state.store.grant_account(&token.grant.id).await.map_err(internal)?
            && let Ok(base) = url::Url::parse(&base)
        {
            url = match api::resolve_path(&base, &args.path) {
                Ok(u) => u,
                Err(e) => return Ok(error_result(e.to_string())),
            };
            if let Err(e) = api::apply_query(&mut url, args.query.as_ref()) {
                return Ok(error_result(e.to_string()));
            }
        }
        let sent = tokio::select! {
            // MCP cancellation: a cancelled call stops its upstream request.
            _ = ctx.ct.cancelled() => return Ok(error_result("Cancelled.")),
            sent = crate::telemetry::api_call(
                provider.id.as_str(),
                api::send(&self.state.http, method, url, &token.token, args.body.as_ref()),
                |r| r.status,
            ) => sent,
        };
        match sent {
            Ok(response) => {
                // MCP utilities/logging: what was called and how it went; never the token.
                self.log(
                    &ctx.peer,
                    if response.status >= 400 { LogLevel::Warning } else { LogLevel::Info },
                    serde_json::json!({"provider": provider.id.as_str(), "method": args.method.to_ascii_uppercase(), "path": args.path, "status": response.status}),
                )
                .await;
                let structured = serde_json::to_value(&response).map_err(internal)?;
                let mut result = CallToolResult::structured(structured.clone());
                result.content = vec![ContentBlock::text(structured.to_string())];
                // Provider-side failures are results the model should read, not protocol errors.
                result.is_error = Some(response.status >= 400);
                Ok(result)
            }
            Err(message) => Ok(error_result(format!("{}: {message}", provider.display_name))),
        }
    }
}
