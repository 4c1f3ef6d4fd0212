//! One MCP request as the broker serves it ([`Context`]): the core and the faces' state, who
//! calls, rmcp's request context, the session the request belongs to and the table of live
//! sessions — handed explicitly to every tool, every request forwarded to a server behind the
//! broker, and the access decisions they share, so each reads top to bottom with what it uses
//! in its signature. What only some of them use (the tool catalogue, the extensions, the servers
//! behind the broker) is handed to those beside it.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::RequestContext;

use super::caller::Caller;
use super::logging::{LogLevel, send_log};
use super::session::scope::SessionScope;
use super::session::table::SessionTable;
use crate::broker::Core;
use crate::state::AppState;

#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// What the broker decides with.
    pub core: &'a Core,
    /// What the faces share around the core: identity, draining and shutdown.
    pub app: &'a AppState,
    /// The live MCP sessions (a link this request hands out keeps its session alive).
    pub sessions: &'a Arc<SessionTable>,
    pub caller: &'a Caller,
    /// rmcp's context: the peer (for nested requests and notifications), `ct`, `_meta`, the id.
    pub request: &'a RequestContext<RoleServer>,
    /// The session's state (a stateless request's own, detached one).
    pub session: &'a Arc<SessionScope>,
}

impl<'a> Context<'a> {
    pub fn new(
        app: &'a AppState,
        sessions: &'a Arc<SessionTable>,
        caller: &'a Caller,
        request: &'a RequestContext<RoleServer>,
        session: &'a Arc<SessionScope>,
    ) -> Self {
        Self { core: &app.core, app, sessions, caller, request, session }
    }

    /// The same request, for `caller` (the caller with the round its request opened).
    pub fn for_caller<'b>(&'b self, caller: &'b Caller) -> Context<'b> {
        Context { caller, ..*self }
    }

    /// Remembers an elicitation this request started, for its completion notification: only
    /// this session hears it (MCP 2025-11-25 client/elicitation: "only to the client that
    /// started the elicitation").
    pub fn remember_elicitation(&self, id: &str) {
        self.session.remember_elicitation(id);
        // The session must still be there when the user finishes, however long the link lives.
        if let Some(session) = &self.session.session_id {
            let until = self.core.now() + self.core.config.authorization_ttl.as_secs() as i64;
            self.sessions.pending_until(session, until);
        }
    }

    /// Sends `notifications/message` if the session (2026-07-28: the request) asked for this
    /// level (MCP utilities/logging). Never include a secret in `data`.
    pub async fn log(&self, level: LogLevel, data: serde_json::Value) {
        send_log(self.request, &self.session.log_level, level, data).await;
    }
}
