//! What every forwarded request shares about a server that did not answer as asked: why
//! ([`Failure`]), the cancellation sent upstream when the client gives up ([`CancelUpstream`]),
//! and the server's JSON-RPC error as the client gets it ([`server_error`] for a plain request,
//! [`server_error_result`] for a tool call). A refused credential is recognised by
//! [`crate::mcp::gateway::upstream::credential::unauthorized`].

use std::sync::Arc;

use rmcp::model::{CallToolResponse, ErrorData, InputRequiredResult};
use serde_json::json;

use crate::mcp::elicitation::URL_ELICITATION_REQUIRED;
use crate::mcp::gateway::catalogue::registry::ServerEntry;
use crate::mcp::gateway::upstream::questions::Questions;
use crate::mcp::results::error_result;

/// Why an attempt got no answer from the server.
pub enum Failure {
    /// 401 with a challenge: the credential was refused.
    Unauthorized,
    /// Down, broke off, or did not answer within the call timeout.
    Unreachable,
    /// The client cancelled.
    Cancelled,
    /// The server answered `-32042`: it wants the user to open a page (shown as the broker's
    /// only when it is the broker's own, [`super::brokers_link`]; else relayed as the server's,
    /// [`super::server_pages`]). `questions`: the connection's, where a relayed link's completion is
    /// matched.
    ServerLink { error: ErrorData, questions: Option<Arc<Questions>> },
    /// A 2026-07-28 client must answer a server's mid-call question first: the broker's round,
    /// the call waiting in a flight ([`super::in_flight`]).
    Asked(Box<InputRequiredResult>),
}

/// Sends `notifications/cancelled` for a forwarded call still open when dropped (the client
/// cancelled, or the call timed out).
pub struct CancelUpstream {
    peer: rmcp::Peer<rmcp::RoleClient>,
    id: Option<rmcp::model::RequestId>,
}

impl CancelUpstream {
    pub fn new(peer: rmcp::Peer<rmcp::RoleClient>, id: rmcp::model::RequestId) -> Self {
        Self { peer, id: Some(id) }
    }

    /// The server answered: nothing to cancel.
    pub fn answered(&mut self) {
        self.id = None;
    }
}

impl Drop for CancelUpstream {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let peer = self.peer.clone();
        let param = rmcp::model::CancelledNotificationParam::new(Some(id), Some("cancelled by the client".into()));
        let notification = rmcp::model::CancelledNotification::new(param);
        tokio::spawn(async move {
            let _ = peer.send_notification(notification.into()).await;
        });
    }
}

/// A server's JSON-RPC error as the client of a plain request gets it: its code and message,
/// with `data` naming the server. (A `-32042` never comes here: it is relayed as the server's
/// page, [`super::server_pages`].)
pub(crate) fn server_error(entry: &ServerEntry, error: ErrorData) -> ErrorData {
    ErrorData::new(error.code, error.message, Some(json!({"server": entry.row.name.as_str()})))
}

/// A server's JSON-RPC error as the client of a tool call gets it: an `isError` naming the
/// server. A URL elicitation (`-32042`) is relayed as the server's own ([`super::server_pages`])
/// before it gets here; one that reaches this is never passed off as the broker's.
pub(crate) fn server_error_result(entry: &ServerEntry, error: ErrorData) -> CallToolResponse {
    if error.code == URL_ELICITATION_REQUIRED {
        return error_result(format!(
            "The server {} asked you to open a page, which the broker could not relay.",
            entry.row.name
        ))
        .into();
    }
    let mut result = error_result(format!("The server {} answered with an error: {}", entry.row.name, error.message));
    result.structured_content =
        Some(json!({"error": "server_error", "server": entry.row.name.as_str(), "code": error.code.0}));
    result.into()
}
