//! The MCP handler ([`BrokerServer`], one per session service) and the protocol's methods
//! ([`ServerHandler`]). Each method reads who calls ([`Caller`]), builds the request's
//! [`Context`] and hands it down: the broker's tools and the servers behind the broker's
//! ([`super::tools::call`]), prompts, resources, completion, subscriptions and logging.
//!
//! The session's scope ([`super::session::scope`]) keeps what the session asked for between
//! requests; a handler binds to it at the first request that names the session.

// `logging/setLevel` is deprecated by SEP-2577 (2026-07-28) but is part of 2025-11-25, which
// this server speaks.
#![allow(deprecated)]

use std::sync::{Arc, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, ErrorData, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{RoleServer, ServerHandler};

use super::caller::Caller;
use super::completion;
use super::context::Context;
use super::extension::ExtensionContext;
use super::gateway::forward::{content, own_resources, subscribe};
use super::notifications::relay_to_session;
use super::results::{prompt_complete, resource_complete, tool_answer};
use super::session::scope::SessionScope;
use super::state::McpState;
use super::tools::call;
use super::tools::catalogue::label;
use super::{resources, subscriptions};
use crate::telemetry::tool_call_span;

#[derive(Clone)]
pub struct BrokerServer {
    state: McpState,
    /// The session's state, shared by every handler instance of the session (a parked session
    /// comes back with a new one); bound at the first request, which names the session.
    scope: Arc<OnceLock<Arc<SessionScope>>>,
}

impl BrokerServer {
    pub fn new(state: McpState) -> Self {
        Self { state, scope: Arc::default() }
    }

    /// The session's scope, or the request's own when it has no session (stateless).
    fn scope(&self) -> &Arc<SessionScope> {
        self.scope.get_or_init(|| Arc::new(SessionScope::detached(self.state.app.shutdown.child_token())))
    }

    /// Who calls, with this handler bound to the caller's session (once) and the session's
    /// relay of notifications started (once).
    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
        let caller = Caller::of(ctx)?;
        if self.scope.get().is_none()
            && let Some(scope) = caller.session_id.as_deref().and_then(|id| self.state.sessions.scope(id))
        {
            let _ = self.scope.set(scope);
        }
        relay_to_session(&self.state, self.scope(), &caller.user.user_id);
        Ok(caller)
    }

    fn context<'a>(&'a self, caller: &'a Caller, ctx: &'a RequestContext<RoleServer>) -> Context<'a> {
        Context::new(&self.state.app, &self.state.sessions, caller, ctx, self.scope())
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
        // Binds the session (its relay passes `tools/list_changed` on from then on).
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
        let span = tool_call_span(&ctx, label(&request.name));
        let called = async {
            let caller = self.caller(&ctx)?;
            Box::pin(call::call(&self.state, self.context(&caller, &ctx), request)).await
        };
        let response = Box::pin(tracing::Instrument::instrument(called, span)).await?;
        tool_answer(response)
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
        let cx = self.context(&caller, &ctx);
        // A server behind the broker's prompt (the broker's own names win, as in the list).
        if self.state.prompts.find(&request.name).is_none()
            && let Some(answer) = Box::pin(content::get_prompt(cx, &self.state.gateway, &request)).await
        {
            return answer.map(prompt_complete);
        }
        let ext = ExtensionContext::of(cx).with_input(request.input_responses, request.request_state);
        Box::pin(self.state.prompts.get(&self.state.app, &request.name, request.arguments, ext))
            .await
            .map(prompt_complete)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let caller = self.caller(&ctx)?;
        Box::pin(completion::take_budget(&self.state, &caller.user.user_id)).await?;
        let ext = ExtensionContext::of(self.context(&caller, &ctx));
        Box::pin(completion::complete(&self.state, request, ext)).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = self.caller(&ctx)?;
        let cx = self.context(&caller, &ctx);
        let own = Box::pin(own_resources::list(cx, &self.state.gateway)).await;
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        Box::pin(resources::list(&self.state, own, cursor)).await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.caller(&ctx)?;
        Box::pin(resources::templates(&self.state, request.as_ref().and_then(|r| r.cursor.as_deref()))).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = self.caller(&ctx)?;
        let cx = self.context(&caller, &ctx);
        // A server behind the broker's resource: its URIs are in a scheme of their own.
        if let Some(answer) = Box::pin(content::read(cx, &self.state.gateway, &request)).await {
            return answer.map(resource_complete);
        }
        let ext = ExtensionContext::of(cx).with_input(request.input_responses, request.request_state);
        Box::pin(resources::read(&self.state, ext, &request.uri)).await.map(resource_complete)
    }

    // MCP 2026-07-28 basic/subscriptions: what a session hears on its GET stream, for a
    // stateless client ([`super::subscriptions`]). rmcp answers -32601 to 2025-11-25 sessions.
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(subscriptions::accepted(&self.state, requested))
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let caller = self.caller(subscription.request_context())?;
        // Heard from now on: an update a server sends as soon as the broker subscribed there
        // (below) is not lost before the relay starts.
        let signals = self.state.app.core.events.subscribe_signals();
        // Resources of servers behind the broker: subscribed to on each server while this listens.
        let cx = self.context(&caller, subscription.request_context());
        let held = Box::pin(subscribe::hold_for_listen(cx, &self.state.gateway, subscription.accepted())).await?;
        let listened = Box::pin(subscriptions::listen(&self.state, &caller.user.user_id, subscription, signals)).await;
        drop(held);
        listened
    }

    // MCP server/resources §Subscriptions: updates go to this session only, for this user's
    // resources only (the relay filters by user).
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = self.caller(&ctx)?;
        let cx = self.context(&caller, &ctx);
        // A server behind the broker's resource: subscribed to on that server, held by this session.
        let keep = |held| self.scope().subscribe_holding(request.uri.clone(), Some(Box::new(held)));
        if let Some(kept) = Box::pin(subscribe::subscribe(cx, &self.state.gateway, &request.uri, keep)).await {
            return kept;
        }
        if !resources::known(&self.state, &request.uri) {
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
