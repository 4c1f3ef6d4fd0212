//! `provider_request`: a call to a provider's API with the user's token injected, as one of
//! the user's accounts there (named, the only one, or chosen: see [`BrokerServer::pick_account`]).

use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ContentBlock, ErrorData};
use rmcp::service::RequestContext;

use super::connections::{AccountPick, internal, unknown_provider};
use super::forms::questions::account_name;
use super::server::{BrokerServer, Caller, LogLevel, error_result};
use super::tools::{PROVIDER_REQUEST, ProviderRequestArgs};
use crate::broker::tokens::AccessToken;
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
        let mut base_url = match api::resolve_path(&provider.api_base_url, &args.path) {
            Ok(u) => u,
            Err(e) => return Ok(error_result(e.to_string())),
        };
        if let Err(e) = api::apply_query(&mut base_url, args.query.as_ref()) {
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
        let url = match self.request_url(provider, &token, base_url.clone(), &args).await? {
            Ok(url) => url,
            Err(result) => return Ok(result),
        };
        let body = args.body.as_ref();
        let send = |url: url::Url, secret: secrecy::SecretString| {
            let method = method.clone();
            async move {
                let call = api::send(&self.state.http, provider, method, url, &secret, body);
                crate::telemetry::api_call(provider.id.as_str(), call, |r| r.status).await
            }
        };
        let mut sent = tokio::select! {
            // MCP cancellation: a cancelled call stops its upstream request.
            _ = ctx.ct.cancelled() => return Ok(error_result("Cancelled.")),
            sent = send(url, token.token.clone()) => sent,
        };
        // A 401 for a token we believed valid: one forced refresh (shared with concurrent
        // callers) and one retry; a second 401 is returned as is (broker::replay). The body is
        // the tool's JSON argument, so the request can be sent again as it was.
        if matches!(&sent, Ok(response) if response.status == 401)
            && let Some(fresh) = crate::broker::replay::token_after_rejection(&self.state, provider, &token).await
        {
            // Built again: a refresh may have brought another API base (instance_url).
            let url = match self.request_url(provider, &fresh, base_url, &args).await? {
                Ok(url) => url,
                Err(result) => return Ok(result),
            };
            sent = tokio::select! {
                _ = ctx.ct.cancelled() => return Ok(error_result("Cancelled.")),
                sent = send(url, fresh.token.clone()) => sent,
            };
        }
        match sent {
            Ok(response) => {
                // MCP utilities/logging: what was called and how it went; never the token.
                self.log(
                    ctx,
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

    /// The URL for `token`'s grant: a provider that names each grant's API base with its token
    /// (Salesforce instance_url) has the path resolved under that grant's base instead, with the
    /// same checks; else `url` as built from the provider's base.
    async fn request_url(
        &self,
        provider: &crate::config::ProviderConfig,
        token: &AccessToken,
        url: url::Url,
        args: &ProviderRequestArgs,
    ) -> Result<Result<url::Url, CallToolResult>, ErrorData> {
        let Some(base) =
            crate::broker::api_base::grant_api_base(&self.state, provider, token).await.map_err(internal)?
        else {
            return Ok(Ok(url));
        };
        let mut url = match api::resolve_path(&base, &args.path) {
            Ok(u) => u,
            Err(e) => return Ok(Err(error_result(e.to_string()))),
        };
        if let Err(e) = api::apply_query(&mut url, args.query.as_ref()) {
            return Ok(Err(error_result(e.to_string())));
        }
        Ok(Ok(url))
    }
}
