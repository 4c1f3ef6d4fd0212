//! The MCP server handler: one instance per MCP session (rmcp calls the factory per session).
//!
//! Each request's user comes from the verified bearer token that the HTTP layer put in the
//! request's extensions — never from the session. The session's scope
//! ([`crate::mcp::session_scope`]) keeps the set of elicitation ids it started, so
//! `notifications/elicitation/complete` goes to that session only (MCP 2025-11-25
//! client/elicitation: "only to the client that started the elicitation").

// `logging/setLevel` and `notifications/message` are deprecated by SEP-2577 (2026-07-28) but
// are part of 2025-11-25, which this server speaks.
#![allow(deprecated)]

use std::sync::{Arc, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult, ContentBlock,
    ErrorData, GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel, LoggingMessageNotification,
    LoggingMessageNotificationParam, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    RequestId, ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig,
    ServerNotification, SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{OriginatingRequestId, RequestContext};
use rmcp::{RoleServer, ServerHandler};

use super::elicitation;
use super::extension::ExtensionContext;
use super::session_scope::SessionScope;
use super::sessions::SESSION_HEADER;
use super::tools::{self, CONNECT_ACCOUNT, DISCONNECT_ACCOUNT, LIST_CONNECTIONS, PROVIDER_REQUEST};
use crate::events::Signal;
use crate::identity::AuthenticatedUser;
use crate::mcp::McpState;

/// What the handler knows about the caller of one request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user: AuthenticatedUser,
    pub session_id: Option<String>,
    pub client_name: Option<String>,
    /// The client declared `elicitation.url` (never send a mode it did not declare).
    pub url_mode: bool,
}

impl Caller {
    /// Who asks, for the core.
    pub(crate) fn requester(&self) -> crate::broker::authorizations::Requester<'_> {
        crate::broker::authorizations::Requester {
            user_id: &self.user.user_id,
            client: &self.user.client,
            client_name: self.client_name.as_deref(),
            mcp_session: self.session_id.as_deref(),
        }
    }
}

#[derive(Clone)]
pub struct BrokerServer {
    pub(crate) state: McpState,
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
        self.scope.get_or_init(|| Arc::new(SessionScope::detached(self.state.shutdown.child_token())))
    }

    /// Binds this handler to its session's scope, once.
    fn bind_scope(&self, session_id: Option<&str>) {
        if self.scope.get().is_none()
            && let Some(scope) = session_id.and_then(|id| self.state.scopes.get(id))
        {
            let _ = self.scope.set(scope);
        }
    }

    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
        let parts = ctx.extensions.get::<http::request::Parts>();
        let user = parts
            .and_then(|p| p.extensions.get::<AuthenticatedUser>())
            .cloned()
            .ok_or_else(|| ErrorData::internal_error("request reached the MCP handler without authentication", None))?;
        let session_id =
            parts.and_then(|p| p.headers.get(SESSION_HEADER)).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let info = ctx.peer.peer_info();
        let client_name =
            info.as_ref().map(|i| i.client_info.title.clone().unwrap_or_else(|| i.client_info.name.clone()));
        // Sessions declare capabilities at initialize; stateless (2026-07-28) requests carry
        // them in `_meta`.
        let url_mode = ctx.peer.supported_elicitation_modes().contains(&rmcp::service::ElicitationMode::Url)
            || ctx.meta.client_capabilities().and_then(|c| c.elicitation).is_some_and(|e| e.url.is_some());
        self.bind_scope(session_id.as_deref());
        let caller = Caller { user, session_id, client_name, url_mode };
        self.start_completion_listener(&caller);
        Ok(caller)
    }

    /// Remembers an elicitation this session started (for the completion notification).
    pub(crate) fn remember_elicitation(&self, id: &str) {
        let scope = self.scope();
        scope.remember_elicitation(id);
        // The session must still be there when the user finishes, however long the link lives.
        if let Some(session) = &scope.session_id {
            let until = self.state.now() + self.state.config.authorization_ttl.as_secs() as i64;
            self.state.life.pending_until(session, until);
        }
    }

    /// Once per session: relay what happens elsewhere as notifications on this session's
    /// standalone (GET) stream, since none of it relates to an open request:
    /// `notifications/elicitation/complete` for elicitations this session started, and
    /// `prompts/list_changed` / `resources/updated` for the catalogue and this user's resources.
    /// They are sent through the session itself, not a handler's peer, so they reach it while
    /// it is parked; the relay ends when the session does.
    fn start_completion_listener(&self, caller: &Caller) {
        let scope = self.scope().clone();
        if scope.session_id.is_none() || scope.listener.set(()).is_err() {
            return;
        }
        let mut events = self.state.events.subscribe();
        let mut signals = self.state.events.subscribe_signals();
        let user_id = caller.user.user_id.clone();
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                let sent = tokio::select! {
                    _ = scope.cancel.cancelled() => break,
                    event = events.recv() => match event {
                        Ok(event) => {
                            // Keyed by user first, then by the session's own elicitations.
                            let ours = event.user_id == user_id && scope.take_elicitation(&event.authorization_id);
                            if !ours { continue; }
                            scope.notify(elicitation::complete_notification(&event.authorization_id))
                        }
                        Err(RecvError::Lagged(_)) => continue,
                        Err(RecvError::Closed) => break,
                    },
                    signal = signals.recv() => match signal {
                        Ok(Signal::PromptsChanged) => {
                            scope.notify(ServerNotification::PromptListChangedNotification(Default::default()))
                        }
                        Ok(Signal::ResourcesChanged { user_id: changed_for, uris }) => {
                            if changed_for != user_id { continue; }
                            scope.subscribed(uris).into_iter().all(|uri| {
                                scope.notify(ServerNotification::ResourceUpdatedNotification(
                                    ResourceUpdatedNotification::new(ResourceUpdatedNotificationParam::new(uri)),
                                ))
                            })
                        }
                        Err(RecvError::Lagged(_)) => continue,
                        Err(RecvError::Closed) => break,
                    },
                };
                if !sent {
                    // The session is gone.
                    break;
                }
            }
        });
    }

    fn extension_context(&self, ctx: &RequestContext<RoleServer>, caller: &Caller) -> ExtensionContext {
        ExtensionContext {
            user: caller.user.clone(),
            request: ctx.clone(),
            log_level: self.scope().log_level.clone(),
            server: self.clone(),
            caller: caller.clone(),
        }
    }

    /// Sends `notifications/message` if the session asked for this level (MCP utilities/logging).
    /// Never include a secret in `data`.
    pub(crate) async fn log(&self, ctx: &RequestContext<RoleServer>, level: LogLevel, data: serde_json::Value) {
        send_log(ctx, &self.scope().log_level, level, data).await;
    }
}

/// The levels the broker itself logs at (rmcp's enum is deprecated for 2026-07-28).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
}

impl LogLevel {
    fn into_rmcp(self) -> LoggingLevel {
        match self {
            LogLevel::Debug => LoggingLevel::Debug,
            LogLevel::Info => LoggingLevel::Info,
            LogLevel::Notice => LoggingLevel::Notice,
            LogLevel::Warning => LoggingLevel::Warning,
            LogLevel::Error => LoggingLevel::Error,
        }
    }
}

pub use super::session_scope::SessionLogLevel;

/// Sends `notifications/message` about the request of `ctx` if the session asked for this
/// level or a less severe one.
pub(crate) async fn send_log(
    ctx: &RequestContext<RoleServer>,
    wanted: &SessionLogLevel,
    level: LogLevel,
    data: serde_json::Value,
) {
    let level = level.into_rmcp();
    let wanted = *wanted.lock().unwrap_or_else(|p| p.into_inner());
    if wanted.is_some_and(|min| severity(level) >= severity(min)) {
        let mut param = LoggingMessageNotificationParam::new(level, data);
        param.logger = Some("oauth-broker".into());
        let _ = ctx.peer.send_notification(logging_notification(param, &ctx.id)).await;
    }
}

/// `notifications/message` sent while handling the request `origin`: it travels on that
/// request's stream (MCP transports: what the server sends before its answer SHOULD relate to
/// the request), as the TypeScript SDK's related notifications do, so a client that has not
/// opened its GET stream yet still gets it; on the GET stream once the request is answered
/// ([`crate::mcp::session_routes`]).
pub fn logging_notification(param: LoggingMessageNotificationParam, origin: &RequestId) -> ServerNotification {
    let mut note = LoggingMessageNotification::new(param);
    note.extensions.insert(OriginatingRequestId(origin.clone()));
    ServerNotification::LoggingMessageNotification(note)
}

fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

pub fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

pub fn error_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

impl BrokerServer {
    /// `tools/call`, inside its span ([`ServerHandler::call_tool`]).
    async fn dispatch_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = self.caller(&ctx)?;
        // MCP server/tools: inputs are validated against the schema the client was shown.
        self.state.tools.check(&request.name, request.arguments.as_ref())?;
        let result = match request.name.as_ref() {
            LIST_CONNECTIONS => self.list_connections(&caller).await,
            CONNECT_ACCOUNT => match tools::parse_args(request.arguments) {
                Ok(args) => self.connect_account(&caller, args, &ctx).await,
                Err(e) => Ok(error_result(e)),
            },
            DISCONNECT_ACCOUNT => match tools::parse_args(request.arguments) {
                Ok(args) => self.disconnect_account_in(&caller, args, &ctx).await,
                Err(e) => Ok(error_result(e)),
            },
            PROVIDER_REQUEST => match tools::parse_args(request.arguments) {
                Ok(args) => self.provider_request(&caller, args, &ctx).await,
                Err(e) => Ok(error_result(e)),
            },
            other => {
                let ext = self.extension_context(&ctx, &caller);
                for extension in self.state.extensions.iter() {
                    if let Some(result) = extension.call_tool(other, request.arguments.clone(), ext.clone()).await {
                        return result.map(Into::into);
                    }
                }
                Err(ErrorData::invalid_params(format!("unknown tool: {other}"), None))
            }
        };
        Ok(result.or_else(super::failure::into_tool_answer)?.into())
    }
}

// Requests that wait on the database, a provider or an extension run boxed: rmcp keeps the
// session's `initialize` future inside the session's task for as long as the session lives,
// and that future is sized for the largest request future of the handler (one `match` over
// all of them). Unboxed, every idle session carried ~11 KB of room for a tool call, and rmcp's
// task per request moved that multi-kilobyte future in: a quarter of a tool call's
// instructions under callgrind (issue 11).
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
        // The tool list never changes at run time.
        if let Some(tools) = capabilities.tools.as_mut() {
            tools.list_changed = Some(false);
        }
        ServerConfig::new(capabilities)
            .with_server_info(implementation)
            .with_instructions(
                "Use list_connections to see which providers are connected. When a tool needs an account you have not \
                 connected, you will be asked to open a link to the broker's own page, sign in and approve; then retry. \
                 provider_request calls a provider's API with the user's stored token, which is never revealed.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.state.tools.tools().to_vec()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Issue 10: everything a tool call logs carries its tool and the HTTP request's id.
        let span = crate::telemetry::tool_call_span(&ctx, super::tools::label(&request.name));
        Box::pin(tracing::Instrument::instrument(self.dispatch_tool(request, ctx), span)).await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.caller(&ctx)?;
        self.state.prompts.list(request.as_ref().and_then(|r| r.cursor.as_deref()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let caller = self.caller(&ctx)?;
        let ext = self.extension_context(&ctx, &caller);
        Box::pin(self.state.prompts.get(&self.state, &request.name, request.arguments, ext)).await.map(Into::into)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let caller = self.caller(&ctx)?;
        Box::pin(super::completion::take_budget(&self.state, &caller.user.user_id)).await?;
        let ext = self.extension_context(&ctx, &caller);
        Box::pin(super::completion::complete(&self.state, request, ext)).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = self.caller(&ctx)?;
        let ext = self.extension_context(&ctx, &caller);
        Box::pin(super::resources::list(&self.state, &ext, request.as_ref().and_then(|r| r.cursor.as_deref()))).await
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
        let ext = self.extension_context(&ctx, &caller);
        Box::pin(super::resources::read(&self.state, ext, &request.uri)).await.map(Into::into)
    }

    // MCP server/resources §Subscriptions: updates go to this session only, for this user's
    // resources only (the listener filters by user).
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = self.caller(&ctx)?;
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
