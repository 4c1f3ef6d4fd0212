//! The MCP protocol methods ([`ServerHandler`] for [`BrokerServer`]), the dispatch of
//! `tools/call` to the broker's tools and the extensions', and the context an extension is
//! given. The handler itself and its caller are in [`super::handler`].

// `logging/setLevel` is deprecated by SEP-2577 (2026-07-28) but is part of 2025-11-25, which
// this server speaks.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, ErrorData, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{RoleServer, ServerHandler};

use super::extension::ExtensionContext;
use super::handler::{BrokerServer, Caller};
use super::input_required::state;
use super::input_required::{Round, RoundRequest};
use super::results::{Unfinished, error_result, finished};
use super::tools::{self, CONNECT_ACCOUNT, DISCONNECT_ACCOUNT, LIST_CONNECTIONS, PROVIDER_REQUEST};

impl BrokerServer {
    pub(crate) fn extension_context(&self, ctx: &RequestContext<RoleServer>, caller: &Caller) -> ExtensionContext {
        ExtensionContext {
            user: caller.user.clone(),
            request: ctx.clone(),
            log_level: self.scope().log_level.clone(),
            server: self.clone(),
            caller: caller.clone(),
            input_responses: None,
            request_state: None,
        }
    }

    /// `tools/call`, inside its span ([`ServerHandler::call_tool`]).
    async fn dispatch_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut caller = self.caller(&ctx)?;
        // MCP server/tools: inputs are validated against the schema the client was shown (a
        // server behind the broker's tools: in `gateway_call`).
        self.state.tools.check(&request.name, request.arguments.as_ref())?;
        // A `requestState` the broker did not make is an extension's own, for the extension to
        // read with the answers to its own requests; the broker's tools never hand one out.
        // After the broker's own link (a state of the broker's) the broker reads both.
        let ours = request.request_state.as_deref().is_some_and(state::is_ours);
        let foreign = request.request_state.is_some() && !ours;
        if foreign && tools::label(&request.name) != "other" {
            return Err(state::refused());
        }
        if caller.round_trips {
            // A retry's state is checked before the tool runs: one that does not fit changes nothing.
            let client = caller.user.client.key();
            let round = Box::pin(Round::open(
                &self.state.app,
                RoundRequest {
                    user_id: &caller.user.user_id,
                    client: &client,
                    method: "tools/call",
                    name: &request.name,
                    arguments: request.arguments.as_ref(),
                    input_responses: request.input_responses.as_ref().filter(|_| ours),
                    request_state: request.request_state.as_deref().filter(|_| ours),
                },
            ))
            .await?;
            caller.round = Some(Arc::new(round));
        }
        let for_extension = !ours;
        let outcome = match Box::pin(self.run_tool(&caller, request, for_extension, &ctx)).await {
            Err(Unfinished::Error(error)) => {
                tools::failure::into_tool_answer(error).map(CallToolResponse::Complete).map_err(Unfinished::Error)
            }
            other => other,
        };
        finished(outcome)
    }

    async fn run_tool(
        &self,
        caller: &Caller,
        request: CallToolRequestParams,
        input_for_extension: bool,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Unfinished> {
        // MCP 2026-07-28: a retry after the broker's browser link waits for the user first.
        // Boxed here and below: the tools' futures are kilobytes, and rmcp moves the request's
        // future more than once (see the note above `impl ServerHandler`).
        if caller.round.is_some()
            && let Some(ended) = Box::pin(self.after_browser(caller, &request.name, ctx)).await?
        {
            return Ok(ended.into());
        }
        let result = match request.name.as_ref() {
            LIST_CONNECTIONS => Ok(Box::pin(self.list_connections(caller)).await?),
            CONNECT_ACCOUNT => match tools::parse_args(request.arguments) {
                Ok(args) => Box::pin(self.connect_account(caller, args, ctx)).await,
                Err(e) => Ok(error_result(e)),
            },
            DISCONNECT_ACCOUNT => match tools::parse_args(request.arguments) {
                Ok(args) => Box::pin(self.disconnect_account_in(caller, args, ctx)).await,
                Err(e) => Ok(error_result(e)),
            },
            PROVIDER_REQUEST => match tools::parse_args(request.arguments) {
                Ok(args) => Box::pin(self.provider_request(caller, args, ctx)).await,
                Err(e) => Ok(error_result(e)),
            },
            other => {
                // A server behind the broker (gateway mode) serves this name.
                if let Some(answer) = Box::pin(self.gateway_call(caller, &request, ctx)).await {
                    return answer;
                }
                let ext = match input_for_extension {
                    true => {
                        self.extension_context(ctx, caller).with_input(request.input_responses, request.request_state)
                    }
                    false => self.extension_context(ctx, caller),
                };
                for extension in self.state.extensions.iter() {
                    if let Some(result) = extension.call_tool(other, request.arguments.clone(), ext.clone()).await {
                        return result.map_err(Unfinished::from);
                    }
                }
                Err(ErrorData::invalid_params(format!("unknown tool: {other}"), None).into())
            }
        };
        result.map(Into::into)
    }
}

// Requests that wait on the database, a provider or an extension run boxed: rmcp keeps the
// session's `initialize` future inside the session's task for as long as the session lives,
// and that future is sized for the largest request future of the handler (one `match` over
// all of them). Unboxed, every idle session carried ~11 KB of room for a tool call, and rmcp's
// task per request moved that multi-kilobyte future in: a quarter of a tool call's
// instructions under callgrind.
impl ServerHandler for BrokerServer {
    fn get_info(&self) -> ServerConfig {
        let mut implementation = Implementation::new("oauth-broker", env!("CARGO_PKG_VERSION"));
        implementation.title = Some("OAuth Broker".into());
        implementation.description = Some(
            "Lets tools act at third-party services on your behalf; you approve each connection in your browser."
                .into(),
        );
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_logging()
            .enable_completions()
            .build();
        // The servers behind the broker (gateway mode) change the tool and resource lists at
        // run time.
        if let Some(tools) = capabilities.tools.as_mut() {
            tools.list_changed = Some(true);
        }
        if let Some(resources) = capabilities.resources.as_mut() {
            resources.list_changed = Some(true);
        }
        ServerConfig::new(capabilities)
            .with_server_info(implementation)
            .with_instructions(
                "Use list_connections to see which providers are connected. When a tool needs an account you have not \
                 connected, you will be asked to open a link to the broker's own page, sign in and approve; then retry. \
                 provider_request calls a provider's API with the user's stored token, which is never revealed.",
            )
    }

    // SEP-2243 (2026-07-28): rmcp checks a request's `Mcp-Param-*` headers against the schema
    // of the tool it names (`x-mcp-header` properties).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        if let Some(tool) = self.state.tools.tools().iter().find(|tool| tool.name == name) {
            return Some(tool.clone());
        }
        let (entry, _) = self.state.gateway.resolve(name)?;
        entry.listed().into_iter().find(|tool| tool.name == name)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // Binds the session (its listener relays `tools/list_changed` from then on).
        self.caller(&ctx)?;
        let builtin = self.state.tools.tools();
        let mut tools = builtin.to_vec();
        tools.extend(self.state.gateway.tools(builtin));
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Everything a tool call logs carries its tool and the HTTP request's id.
        let span = crate::telemetry::tool_call_span(&ctx, super::tools::label(&request.name));
        let response = Box::pin(tracing::Instrument::instrument(self.dispatch_tool(request, ctx), span)).await?;
        super::results::tool_answer(response)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.caller(&ctx)?;
        let gateway = &self.state.gateway;
        self.state.prompts.list_with(|taken| gateway.prompts(taken), request.as_ref().and_then(|r| r.cursor.as_deref()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let caller = self.caller(&ctx)?;
        // A server behind the broker's prompt (the broker's own names win, as in the list).
        if self.state.prompts.find(&request.name).is_none()
            && let Some(answer) = Box::pin(self.gateway_prompt(&caller, &request, &ctx)).await
        {
            return answer.map(super::results::prompt_complete);
        }
        let ext = self.extension_context(&ctx, &caller).with_input(request.input_responses, request.request_state);
        Box::pin(self.state.prompts.get(&self.state.app, &request.name, request.arguments, ext))
            .await
            .map(super::results::prompt_complete)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let caller = self.caller(&ctx)?;
        Box::pin(super::tools::completion::take_budget(&self.state, &caller.user.user_id)).await?;
        let ext = self.extension_context(&ctx, &caller);
        Box::pin(super::tools::completion::complete(&self.state, request, ext)).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = self.caller(&ctx)?;
        let ext = self.extension_context(&ctx, &caller);
        let own = Box::pin(self.gateway_own_resources(&caller, &ctx)).await;
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        Box::pin(super::resources::list(&self.state, &ext, own, cursor)).await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let caller = self.caller(&ctx)?;
        let ext = self.extension_context(&ctx, &caller);
        Box::pin(super::resources::templates(&self.state, &ext, request.as_ref().and_then(|r| r.cursor.as_deref())))
            .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = self.caller(&ctx)?;
        // A server behind the broker's resource: its URIs are in a scheme of their own.
        if let Some(answer) = Box::pin(self.gateway_read(&caller, &request, &ctx)).await {
            return answer.map(super::results::resource_complete);
        }
        let ext = self.extension_context(&ctx, &caller).with_input(request.input_responses, request.request_state);
        Box::pin(super::resources::read(&self.state, ext, &request.uri)).await.map(super::results::resource_complete)
    }

    // MCP 2026-07-28 basic/subscriptions: what a session hears on its GET stream, for a
    // stateless client ([`super::subscriptions`]). rmcp answers -32601 to 2025-11-25 sessions.
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(super::subscriptions::accepted(&self.state, requested))
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let caller = self.caller(subscription.request_context())?;
        // Heard from now on: an update a server sends as soon as the broker subscribed there
        // (below) is not lost before the relay starts.
        let signals = self.state.app.core.events.subscribe_signals();
        // Resources of servers behind the broker: subscribed to on each server while this listens.
        let held =
            Box::pin(self.hold_for_listen(&caller, subscription.accepted(), subscription.request_context())).await?;
        let listened =
            Box::pin(super::subscriptions::listen(&self.state, &caller.user.user_id, subscription, signals)).await;
        drop(held);
        listened
    }

    // MCP server/resources §Subscriptions: updates go to this session only, for this user's
    // resources only (the listener filters by user).
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = self.caller(&ctx)?;
        // A server behind the broker's resource: subscribed to on that server, held by this session.
        let keep = |held| self.scope().subscribe_holding(request.uri.clone(), Some(Box::new(held)));
        if let Some(kept) = Box::pin(self.gateway_subscribe(&caller, &request.uri, &ctx, keep)).await {
            return kept;
        }
        let ext = self.extension_context(&ctx, &caller);
        if !Box::pin(super::resources::exists(&self.state, &ext, &request.uri)).await {
            return Err(ErrorData::resource_not_found(format!("unknown resource: {}", request.uri), None));
        }
        self.scope().subscribe(request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.caller(&ctx)?;
        self.scope().unsubscribe(&request.uri);
        Ok(())
    }

    // MCP utilities/logging: remembered per session.
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.caller(&ctx)?;
        *self.scope().log_level.lock().unwrap_or_else(|p| p.into_inner()) = Some(request.level);
        Ok(())
    }
}
