//! The extension point: tools, prompts, resources and completions served next to the broker's
//! own, through the same MCP endpoint, authentication and sessions.
//!
//! An extender implements [`Extension`] and passes it to [`crate::app::AppBuilder::extension`].
//! Every method has a default, so an extension only writes what it adds. Calls get an
//! [`ExtensionContext`]: the verified user and rmcp's request context (the peer, for
//! elicitation, sampling, progress and logging; the cancellation token; `_meta`).
//!
//! Asking the client for something (a form, a sampling, its roots) differs by revision:
//! - 2025-11-25 sessions: a nested request through `ctx.request.peer` while the call waits;
//! - 2026-07-28 (stateless, [`ExtensionContext::input_required_supported`]): answer the call with
//!   an `InputRequiredResult` (rmcp `CallToolResponse::InputRequired`, or the
//!   `GetPromptResponse` / `ReadResourceResponse` variant), whose `inputRequests` the client
//!   fulfils before it retries the same request with [`ExtensionContext::input_responses`] and
//!   the echoed [`ExtensionContext::request_state`] (MCP 2026-07-28 basic/utilities/mrtr). The
//!   state comes back from the client: seal it (rmcp `RequestStateCodec`) if it matters.
//!   When [`ExtensionContext::access_token`] answers with the broker's own link, the broker's
//!   state (it starts `ob1.`) comes back instead: the broker reads it, waits for the browser and
//!   then calls the tool again, with no state or responses of the extension's on that call.
//!
//! Names are the extension's responsibility: a tool, prompt or resource with the same name as a
//! built-in one is shadowed by the built-in.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, CompleteRequestParams, CompletionInfo, ErrorData,
    GetPromptResponse, InputResponses, JsonObject, Prompt, ReadResourceResponse, Resource, ResourceTemplate, Tool,
};
use rmcp::service::RequestContext;

use super::access::token_for_tool;
use super::caller::Caller;
use super::context::Context;
use super::session::scope::SessionScope;
use super::session::table::SessionTable;
use crate::identity::AuthenticatedUser;
use crate::state::AppState;

/// What an extension knows about the request it serves.
#[derive(Clone)]
pub struct ExtensionContext {
    /// The user from the request's verified bearer token.
    pub user: AuthenticatedUser,
    /// rmcp's context: `peer` (elicitation, sampling, progress, logging), `ct`, `meta`.
    pub request: RequestContext<RoleServer>,
    /// The session's `logging/setLevel` choice, for [`ExtensionContext::log`].
    pub(crate) log_level: crate::mcp::logging::SessionLogLevel,
    /// The faces' state, the live sessions, the session and the caller, for
    /// [`ExtensionContext::access_token`].
    pub(crate) app: AppState,
    pub(crate) sessions: Arc<SessionTable>,
    pub(crate) session: Arc<SessionScope>,
    pub(crate) caller: Caller,
    /// What a retried 2026-07-28 request carries (MCP 2026-07-28 basic/utilities/mrtr).
    pub(crate) input_responses: Option<InputResponses>,
    pub(crate) request_state: Option<String>,
}

/// Why a tool cannot have a token yet, as the tool should answer: return
/// [`TokenUnavailable::into_tool_response`] as is.
#[derive(Debug)]
pub enum TokenUnavailable {
    /// A protocol error, typically `-32042` with the link the user must open (connect, or let
    /// this client use an existing connection); the client retries after.
    Error(ErrorData),
    /// An `isError` result: the link as text for clients without URL elicitation, an unknown
    /// provider, or a provider that is down.
    Result(CallToolResult),
    /// MCP 2026-07-28: an `InputRequiredResult` with the link; the client's retry of the same
    /// call waits for the user, then runs the tool again.
    InputRequired(Box<rmcp::model::InputRequiredResult>),
}

impl TokenUnavailable {
    /// The answer for clients of either revision.
    pub fn into_tool_response(self) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        match self {
            TokenUnavailable::InputRequired(result) => Ok(rmcp::model::CallToolResponse::InputRequired(*result)),
            other => other.into_tool_result().map(Into::into),
        }
    }

    /// The answer as a tool result, for tools that return one: a 2026-07-28 round trip cannot
    /// be one, so it becomes an error asking the client to call again (use
    /// [`TokenUnavailable::into_tool_response`] instead).
    pub fn into_tool_result(self) -> Result<CallToolResult, ErrorData> {
        match self {
            TokenUnavailable::Error(error) => Err(error),
            TokenUnavailable::Result(result) => Ok(result),
            TokenUnavailable::InputRequired(_) => Err(ErrorData::internal_error(
                "this tool needs the user to approve in the browser, and cannot ask in this protocol revision",
                None,
            )),
        }
    }
}

impl ExtensionContext {
    /// What an extension is given about the request of `cx`.
    pub(crate) fn of(cx: Context<'_>) -> Self {
        ExtensionContext {
            user: cx.caller.user.clone(),
            request: cx.request.clone(),
            log_level: cx.session.log_level.clone(),
            app: cx.app.clone(),
            sessions: cx.sessions.clone(),
            session: cx.session.clone(),
            caller: cx.caller.clone(),
            input_responses: None,
            request_state: None,
        }
    }

    /// The retry's `inputResponses` and `requestState`, for the tool, prompt or resource
    /// methods (the broker's own code builds the context).
    pub(crate) fn with_input(mut self, input_responses: Option<InputResponses>, request_state: Option<String>) -> Self {
        self.input_responses = input_responses;
        self.request_state = request_state;
        self
    }

    /// Whether this request may be answered with an `InputRequiredResult`: it was made in
    /// revision 2026-07-28 or later. Older sessions ask through `self.request.peer` instead;
    /// rmcp refuses an `InputRequiredResult` to them.
    pub fn input_required_supported(&self) -> bool {
        crate::mcp::revision::is_stateless(&self.request)
    }

    /// The client's answers to the `inputRequests` of an earlier `InputRequiredResult`, by the
    /// keys the extension chose; `None` on a first call. Each value is the client's JSON as
    /// sent (an `ElicitResult`, `CreateMessageResult` or `ListRootsResult`): check its shape.
    pub fn input_responses(&self) -> Option<&InputResponses> {
        self.input_responses.as_ref()
    }

    /// The `requestState` the client echoed back, untouched by the broker. It is whatever the
    /// client sent: open it with the codec that sealed it and refuse it (`-32602`) if it fails.
    pub fn request_state(&self) -> Option<&str> {
        self.request_state.as_deref()
    }

    /// What the client declared it can do: per request in 2026-07-28 (`_meta`), at
    /// `initialize` for a session.
    pub fn client_capabilities(&self) -> ClientCapabilities {
        self.request.client_capabilities().unwrap_or_default()
    }

    /// `Err(-32021)` (MissingRequiredClientCapability, `data.requiredCapabilities` = `required`)
    /// unless the client declared every capability named in `required`, down to sub-keys such
    /// as `elicitation.url` (MCP 2026-07-28 basic/lifecycle: a server must not rely on what the
    /// client did not declare).
    pub fn require_client_capabilities(&self, required: ClientCapabilities) -> Result<(), ErrorData> {
        let declared = serde_json::to_value(self.client_capabilities()).unwrap_or_default();
        let wanted = serde_json::to_value(&required).unwrap_or_default();
        if declares(&declared, &wanted) { Ok(()) } else { Err(ErrorData::missing_required_client_capability(required)) }
    }

    /// Tells listening clients that this extension's prompts changed
    /// (`notifications/prompts/list_changed` to sessions and to `subscriptions/listen` streams
    /// that asked for it). [`Extension::prompts`] is asked again on the next listing.
    pub fn prompts_changed(&self) {
        self.app.core.events.signal(crate::events::Signal::PromptsChanged);
    }

    /// Tells listening clients that the tool list changed (`notifications/tools/list_changed`
    /// to sessions and to `subscriptions/listen` streams that asked for it): for an extension
    /// whose tools' behaviour or availability changed at run time. The broker's own list
    /// changes (servers behind it) are announced by the broker.
    pub fn tools_changed(&self) {
        self.app.core.events.signal(crate::events::Signal::ToolsChanged);
    }

    /// A token for the user's account at `provider` (`account` as `list_connections` names it,
    /// `None` for the most recent), carrying `required` scopes, that **this client** may use.
    ///
    /// This is the only way an extension should act at a provider: it applies every rule the
    /// broker's own tools follow — connected? scopes? refreshed? and has the user allowed this
    /// client to use the connection (MCP security best practices §Confused deputy)? — and
    /// otherwise hands back the answer that sends the user to the right page. Never put the
    /// token in a result, a log line or an error.
    pub async fn access_token(
        &self,
        provider: &str,
        account: Option<&str>,
        required: &[&str],
    ) -> Result<crate::broker::tokens::AccessToken, TokenUnavailable> {
        let core = &self.app.core;
        let Some(provider) = core.providers.find(provider) else {
            let message = crate::mcp::tools::catalogue::unknown_provider(&core.providers.ids(), provider);
            return Err(TokenUnavailable::Result(crate::mcp::results::error_result(message)));
        };
        let required = crate::domain::Scopes::parse(required.iter().copied())
            .map_err(|e| e.to_string())
            .and_then(|scopes| {
                crate::providers::scopes::check(&provider, &scopes).map(|()| scopes).map_err(|e| e.to_string())
            })
            .map_err(|e| TokenUnavailable::Result(crate::mcp::results::error_result(e)))?;
        let cx = Context::new(&self.app, &self.sessions, &self.caller, &self.request, &self.session);
        token_for_tool(cx, &provider, account, &required).await.map_err(|answer| match answer {
            Ok(result) => TokenUnavailable::Result(result),
            Err(crate::mcp::results::Unfinished::Error(error)) => TokenUnavailable::Error(error),
            Err(crate::mcp::results::Unfinished::InputRequired(result)) => TokenUnavailable::InputRequired(result),
        })
    }

    /// Sends `notifications/message` if the session asked for `level` or more severe
    /// (MCP utilities/logging). Never put a secret in `data`.
    /// In 2026-07-28 the request's own `_meta` logLevel decides, and without one nothing is sent.
    pub async fn log(&self, level: crate::mcp::logging::LogLevel, data: serde_json::Value) {
        crate::mcp::logging::send_log(&self.request, &self.log_level, level, data).await;
    }

    /// Sends `notifications/message` about this request whatever the session's logging level
    /// (on this request's stream while it runs, see [`crate::mcp::logging::logging_notification`]).
    /// A 2026-07-28 request gets it only if its `_meta` asked for this level or a lower one
    /// (MCP 2026-07-28: no log messages for a request that did not ask).
    // Logging is deprecated by SEP-2577 (2026-07-28) but part of 2025-11-25, which this serves.
    #[allow(deprecated)]
    pub async fn notify_log(
        &self,
        param: rmcp::model::LoggingMessageNotificationParam,
    ) -> Result<(), rmcp::service::ServiceError> {
        if !crate::mcp::logging::request_allows(&self.request, param.level) {
            return Ok(());
        }
        self.request.peer.send_notification(crate::mcp::logging::logging_notification(param, &self.request.id)).await
    }
}

/// Whether `declared` has every key of `wanted`, recursively through objects (a capability
/// declared as `{}` names no sub-capability).
fn declares(declared: &serde_json::Value, wanted: &serde_json::Value) -> bool {
    match wanted.as_object() {
        Some(keys) => keys.iter().all(|(key, inner)| declared.get(key).is_some_and(|d| declares(d, inner))),
        None => true,
    }
}

pub type ExtensionFuture<'a, T> = BoxFuture<'a, Option<Result<T, ErrorData>>>;

pub trait Extension: Send + Sync + 'static {
    /// Tools this extension adds (listed after the broker's own). Asked once, when the app is
    /// built: the list and each `inputSchema` (which every call is checked against) are fixed.
    fn tools(&self) -> Vec<Tool> {
        Vec::new()
    }

    /// Runs `name` if it is one of this extension's tools; `None` otherwise. A finished call
    /// answers `CallToolResult.into()`; a 2026-07-28 call that needs the client first answers
    /// `CallToolResponse::InputRequired` (see the module notes). The broker offers no tasks, so
    /// `CallToolResponse::Task` is refused.
    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Option<JsonObject>,
        ctx: ExtensionContext,
    ) -> ExtensionFuture<'a, CallToolResponse> {
        let _ = (name, arguments, ctx);
        Box::pin(async { None })
    }

    /// Prompts this extension adds, asked at each listing (call
    /// [`ExtensionContext::prompts_changed`] when they change). Required arguments are checked
    /// by the catalogue before [`Extension::get_prompt`] is called.
    fn prompts(&self) -> Vec<Prompt> {
        Vec::new()
    }

    /// Renders `name`: `GetPromptResult.into()`, or in 2026-07-28 an `InputRequiredResult`.
    fn get_prompt<'a>(
        &'a self,
        name: &'a str,
        arguments: BTreeMap<String, String>,
        ctx: ExtensionContext,
    ) -> ExtensionFuture<'a, GetPromptResponse> {
        let _ = (name, arguments, ctx);
        Box::pin(async { None })
    }

    /// Concrete resources this extension serves.
    fn resources(&self) -> Vec<Resource> {
        Vec::new()
    }

    fn resource_templates(&self) -> Vec<ResourceTemplate> {
        Vec::new()
    }

    /// Reads `uri` if this extension serves it; `None` otherwise. `ReadResourceResult.into()`,
    /// or in 2026-07-28 an `InputRequiredResult`.
    fn read_resource<'a>(&'a self, uri: &'a str, ctx: ExtensionContext) -> ExtensionFuture<'a, ReadResourceResponse> {
        let _ = (uri, ctx);
        Box::pin(async { None })
    }

    /// Completes an argument of one of this extension's prompts or resource templates.
    fn complete<'a>(
        &'a self,
        request: &'a CompleteRequestParams,
        ctx: ExtensionContext,
    ) -> ExtensionFuture<'a, CompletionInfo> {
        let _ = (request, ctx);
        Box::pin(async { None })
    }
}

/// The registered extensions, in registration order.
#[derive(Clone, Default)]
pub struct Extensions(pub std::sync::Arc<Vec<std::sync::Arc<dyn Extension>>>);

impl Extensions {
    pub fn iter(&self) -> impl Iterator<Item = &std::sync::Arc<dyn Extension>> {
        self.0.iter()
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Extensions({})", self.0.len())
    }
}
