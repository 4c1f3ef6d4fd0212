//! Which user owns which MCP session.
//!
//! A session id is never a credential (MCP security best practices, "session hijacking"): each
//! request is authenticated by its own bearer token, and a session belongs to the user whose
//! token opened it. A request naming a session with another user's token is refused before it
//! reaches rmcp, so one user can never read another's stream or answer their elicitations.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::identity::AuthenticatedUser;
use crate::state::AppState;

pub const SESSION_HEADER: &str = "mcp-session-id";
/// Owners of sessions idle longer than this are forgotten (rmcp drops idle sessions sooner);
/// a forgotten session is refused, never opened to whoever names it.
const IDLE_FORGET_SECONDS: i64 = 3600;

#[derive(Debug, Default)]
pub struct SessionRegistry {
    owners: Mutex<HashMap<String, Owner>>,
}

#[derive(Debug, Clone)]
struct Owner {
    user_id: String,
    last_seen: i64,
}

pub enum SessionCheck {
    /// A session of this user.
    Allowed,
    /// The session belongs to someone else.
    Foreign,
    /// No owner on record: refused like an ended session.
    Unknown,
}

impl SessionRegistry {
    fn check(&self, session_id: &str, user_id: &str, now: i64) -> SessionCheck {
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        match owners.get_mut(session_id) {
            Some(owner) if owner.user_id == user_id => {
                owner.last_seen = now;
                SessionCheck::Allowed
            }
            Some(_) => SessionCheck::Foreign,
            None => SessionCheck::Unknown,
        }
    }

    fn bind(&self, session_id: &str, user_id: &str, now: i64) {
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.retain(|_, o| now - o.last_seen < IDLE_FORGET_SECONDS);
        owners.insert(session_id.to_owned(), Owner { user_id: user_id.to_owned(), last_seen: now });
    }

    /// Called when a session ends.
    pub fn forget(&self, session_id: &str) {
        self.owners.lock().unwrap_or_else(|p| p.into_inner()).remove(session_id);
    }

    pub fn len(&self) -> usize {
        self.owners.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Runs after bearer authentication on /mcp.
pub async fn enforce_session_owner(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(user) = request.extensions().get::<AuthenticatedUser>().cloned() else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let now = state.now();
    let named = request.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    if let Some(session_id) = &named {
        match state.sessions.check(session_id, &user.user_id, now) {
            SessionCheck::Allowed => {}
            SessionCheck::Foreign => {
                tracing::warn!(user = %user.user_id, "request named another user's MCP session; refused");
                return rpc_error(StatusCode::FORBIDDEN, "this session belongs to another user");
            }
            // An owner we no longer know (ended, forgotten, or from before a restart) cannot be
            // checked, so the session is treated as gone and the client re-initializes (MCP
            // transports: 404 for a terminated session). Never let it through unchecked.
            SessionCheck::Unknown => return rpc_error(StatusCode::NOT_FOUND, "session not found"),
        }
    }
    let is_delete = request.method() == Method::DELETE;
    let response = next.run(request).await;
    match (&named, response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok())) {
        // The initialize response names the new session: it belongs to this user.
        (None, Some(created)) => state.sessions.bind(created, &user.user_id, now),
        (Some(ended), _) if is_delete && response.status().is_success() => state.sessions.forget(ended),
        _ => {}
    }
    response
}

fn rpc_error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": message}}))).into_response()
}
