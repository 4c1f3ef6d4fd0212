//! The MCP server handler: one instance per MCP session (rmcp calls the factory per session).
//!
//! Each request's user comes from the verified bearer token that the HTTP layer put in the
//! request's extensions — never from the session. The handler also keeps the set of elicitation
//! ids its session started, so `notifications/elicitation/complete` goes to that session only
//! (MCP 2025-11-25 client/elicitation: "only to the client that started the elicitation").

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;

use super::elicitation;
use super::sessions::SESSION_HEADER;
use super::tools::{self, CONNECT_ACCOUNT, DISCONNECT_ACCOUNT, LIST_CONNECTIONS, PROVIDER_REQUEST};
use crate::identity::AuthenticatedUser;
use crate::state::AppState;

/// What the handler knows about the caller of one request.
pub struct Caller {
    pub user: AuthenticatedUser,
    pub session_id: Option<String>,
    pub client_name: Option<String>,
    /// The client declared `elicitation.url` (never send a mode it did not declare).
    pub url_mode: bool,
}

#[derive(Clone)]
pub struct BrokerServer {
    pub(crate) state: AppState,
    scope: Arc<SessionScope>,
}

/// Per-session state; dropped when rmcp drops the session's handler.
struct SessionScope {
    /// Elicitation ids this session started.
    issued: Arc<Mutex<HashSet<String>>>,
    listener: OnceLock<()>,
    session_id: OnceLock<String>,
    cancel: CancellationToken,
    state: AppState,
}

impl Drop for SessionScope {
    fn drop(&mut self) {
        self.cancel.cancel();
        if let Some(id) = self.session_id.get() {
            self.state.sessions.forget(id);
        }
    }
}

impl BrokerServer {
    pub fn new(state: AppState) -> Self {
        let cancel = state.shutdown.child_token();
        let scope = SessionScope {
            issued: Default::default(),
            listener: OnceLock::new(),
            session_id: OnceLock::new(),
            cancel,
            state: state.clone(),
        };
        Self { state, scope: Arc::new(scope) }
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
        let url_mode = ctx.peer.supported_elicitation_modes().contains(&rmcp::service::ElicitationMode::Url);
        let caller = Caller { user, session_id, client_name, url_mode };
        self.start_completion_listener(&ctx.peer, &caller);
        Ok(caller)
    }

    /// Remembers an elicitation this session started (for the completion notification).
    pub(crate) fn remember_elicitation(&self, id: &str) {
        self.scope.issued.lock().unwrap_or_else(|p| p.into_inner()).insert(id.to_owned());
    }

    /// Once per session: forward "authorization finished" signals for elicitations this
    /// session started, as `notifications/elicitation/complete`. It goes on the session's
    /// standalone (GET) stream: it relates to no open request.
    fn start_completion_listener(&self, peer: &Peer<RoleServer>, caller: &Caller) {
        let Some(session_id) = caller.session_id.clone() else { return };
        if self.scope.listener.set(()).is_err() {
            return;
        }
        let _ = self.scope.session_id.set(session_id);
        let mut events = self.state.events.subscribe();
        let issued = self.scope.issued.clone();
        let cancel = self.scope.cancel.clone();
        let user_id = caller.user.user_id.clone();
        let peer = peer.clone();
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    _ = cancel.cancelled() => break,
                    event = events.recv() => event,
                };
                let event = match event {
                    Ok(event) => event,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                };
                // Keyed by user first, then by the session's own elicitations.
                let ours = event.user_id == user_id
                    && issued.lock().unwrap_or_else(|p| p.into_inner()).remove(&event.authorization_id);
                if !ours {
                    continue;
                }
                if peer.send_notification(elicitation::complete_notification(&event.authorization_id)).await.is_err() {
                    break;
                }
            }
        });
    }
}

pub fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

pub fn error_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

impl ServerHandler for BrokerServer {
    fn get_info(&self) -> ServerConfig {
        let mut implementation = Implementation::new("oauth-broker", env!("CARGO_PKG_VERSION"));
        implementation.title = Some("OAuth Broker".into());
        implementation.description = Some(
            "Lets tools act at third-party services on your behalf; you approve each connection in your browser."
                .into(),
        );
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
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
        Ok(ListToolsResult::with_all_items(tools::catalogue(&self.state.providers.ids())))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = self.caller(&ctx)?;
        let result = match request.name.as_ref() {
            LIST_CONNECTIONS => self.list_connections(&caller).await,
            CONNECT_ACCOUNT => match tools::parse_args(request.arguments) {
                Ok(args) => self.connect_account(&caller, args, &ctx).await,
                Err(e) => Ok(error_result(e)),
            },
            DISCONNECT_ACCOUNT => match tools::parse_args(request.arguments) {
                Ok(args) => self.disconnect_account(&caller, args).await,
                Err(e) => Ok(error_result(e)),
            },
            PROVIDER_REQUEST => match tools::parse_args(request.arguments) {
                Ok(args) => self.provider_request(&caller, args, &ctx).await,
                Err(e) => Ok(error_result(e)),
            },
            other => Err(ErrorData::invalid_params(format!("unknown tool: {other}"), None)),
        }?;
        Ok(result.into())
    }
}
