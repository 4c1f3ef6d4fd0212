//! The MCP handler ([`BrokerServer`], one per session service) and who calls ([`Caller`]):
//! what every tool, prompt and resource needs about the request it serves.
//!
//! Each request's user comes from the verified bearer token that the HTTP layer put in the
//! request's extensions — never from the session. The session's scope
//! ([`crate::mcp::session::scope`]) keeps the set of elicitation ids it started, so
//! `notifications/elicitation/complete` goes to that session only (MCP 2025-11-25
//! client/elicitation: "only to the client that started the elicitation"). The
//! `ServerHandler` protocol methods are in [`super::server`].

use std::sync::{Arc, OnceLock};

use rmcp::RoleServer;
use rmcp::model::{ErrorData, ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerNotification};
use rmcp::service::RequestContext;

use super::elicitation;
use super::input_required::Round;
use super::logging::LogLevel;
use super::session::owner::SESSION_HEADER;
use super::session::scope::SessionScope;
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
    /// The client declared form-mode elicitation (or an empty `elicitation: {}`).
    pub form_mode: bool,
    /// The request's revision asks the user by round trips (2026-07-28: `InputRequiredResult`
    /// and a retry) rather than by requests of the server's own (2025-11-25).
    pub round_trips: bool,
    /// For a 2026-07-28 `tools/call`: what its state carried and how to ask the next question.
    pub(crate) round: Option<Arc<Round>>,
}

impl Caller {
    /// Who asks, for the core.
    pub(crate) fn requester(&self) -> crate::broker::authorizations::Requester<'_> {
        crate::broker::authorizations::Requester {
            user_id: &self.user.user_id,
            client: &self.user.client,
            client_name: self.client_name.as_deref(),
            mcp_session: self.session_id.as_deref(),
            server: None,
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
    pub(crate) fn scope(&self) -> &Arc<SessionScope> {
        self.scope.get_or_init(|| Arc::new(SessionScope::detached(self.state.app.shutdown.child_token())))
    }

    /// Binds this handler to its session's scope, once.
    fn bind_scope(&self, session_id: Option<&str>) {
        if self.scope.get().is_none()
            && let Some(scope) = session_id.and_then(|id| self.state.sessions.scope(id))
        {
            let _ = self.scope.set(scope);
        }
    }

    pub(crate) fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
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
        let declared = ctx.meta.client_capabilities().and_then(|c| c.elicitation);
        let url_mode = ctx.peer.supported_elicitation_modes().contains(&rmcp::service::ElicitationMode::Url)
            || declared.as_ref().is_some_and(|e| e.url.is_some());
        let round_trips = super::revision::is_stateless(ctx);
        let form_mode = if round_trips {
            // An empty `elicitation: {}` means form mode (client/elicitation §Capabilities).
            declared.as_ref().is_some_and(|e| e.form.is_some() || e.url.is_none())
        } else {
            super::forms::form_mode(&ctx.peer)
        };
        self.bind_scope(session_id.as_deref());
        let caller = Caller { user, session_id, client_name, url_mode, form_mode, round_trips, round: None };
        self.start_completion_listener(&caller);
        Ok(caller)
    }

    /// Remembers an elicitation this session started (for the completion notification).
    pub(crate) fn remember_elicitation(&self, id: &str) {
        let scope = self.scope();
        scope.remember_elicitation(id);
        // The session must still be there when the user finishes, however long the link lives.
        if let Some(session) = &scope.session_id {
            let until = self.state.app.core.now() + self.state.app.core.config.authorization_ttl.as_secs() as i64;
            self.state.sessions.pending_until(session, until);
        }
    }

    /// Once per session: relay what happens elsewhere as notifications on this session's
    /// standalone (GET) stream, since none of it relates to an open request:
    /// `notifications/elicitation/complete` for elicitations this session started, and
    /// `prompts/list_changed` / `resources/updated` for the catalogue and this user's resources,
    /// and the list changes of the servers behind the broker.
    /// They are sent through the session itself, not a handler's peer, so they reach it while
    /// it is parked; the relay ends when the session does.
    fn start_completion_listener(&self, caller: &Caller) {
        let scope = self.scope().clone();
        if scope.session_id.is_none() || scope.listener.set(()).is_err() {
            return;
        }
        let mut events = self.state.app.core.events.subscribe();
        let mut signals = self.state.app.core.events.subscribe_signals();
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
                        Ok(Signal::ToolsChanged) => {
                            scope.notify(ServerNotification::ToolListChangedNotification(Default::default()))
                        }
                        Ok(Signal::ResourceListChanged) => {
                            scope.notify(ServerNotification::ResourceListChangedNotification(Default::default()))
                        }
                        Ok(Signal::GatewayResourcesChanged { user_id: changed_for, .. }) => {
                            if changed_for.is_some_and(|changed_for| changed_for != user_id) { continue; }
                            scope.notify(ServerNotification::ResourceListChangedNotification(Default::default()))
                        }
                        Ok(
                            Signal::ResourcesChanged { user_id: changed_for, uris }
                            | Signal::ServerResourcesUpdated { user_id: changed_for, uris },
                        ) => {
                            if changed_for != user_id { continue; }
                            scope.subscribed(uris).into_iter().all(|uri| {
                                scope.notify(ServerNotification::ResourceUpdatedNotification(
                                    ResourceUpdatedNotification::new(ResourceUpdatedNotificationParam::new(uri)),
                                ))
                            })
                        }
                        // The gateway reads the list back and signals what changed for clients.
                        Ok(Signal::GatewayListsStored { .. }) | Err(RecvError::Lagged(_)) => continue,
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

    /// Sends `notifications/message` if the session asked for this level (MCP utilities/logging).
    /// Never include a secret in `data`.
    pub(crate) async fn log(&self, ctx: &RequestContext<RoleServer>, level: LogLevel, data: serde_json::Value) {
        super::logging::send_log(ctx, &self.scope().log_level, level, data).await;
    }
}
