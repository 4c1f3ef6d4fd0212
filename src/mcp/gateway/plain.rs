//! What every forwarded request shares about a server that did not answer: why ([`Failure`]),
//! how a refused credential is recognised ([`unauthorized`]), the cancellation sent upstream
//! when the client gives up ([`CancelUpstream`]), and a plain request's JSON-RPC error as the
//! client gets it ([`passed_on`]). The plain request itself: [`super::plain_request`].

use std::sync::Arc;

use rmcp::model::{ErrorData, InputRequiredResult};
use rmcp::transport::streamable_http_client::AuthRequiredError;
use serde_json::json;

use super::registry::ServerEntry;
use super::relay::Questions;

/// Why an attempt got no answer from the server.
pub enum Failure {
    /// 401 with a challenge: the credential was refused.
    Unauthorized,
    /// Down, broke off, or did not answer within the call timeout.
    Unreachable,
    /// The client cancelled.
    Cancelled,
    /// The server answered `-32042`: it wants the user to open a page (shown as the broker's
    /// only when it is the broker's own, [`super::server_link`]; else relayed as the server's,
    /// [`super::pages`]). `questions`: the connection's, where a relayed link's completion is
    /// matched.
    ServerLink { error: ErrorData, questions: Option<Arc<Questions>> },
    /// A 2026-07-28 client must answer a server's mid-call question first: the broker's round,
    /// the call waiting in a flight ([`super::flights`]).
    Asked(Box<InputRequiredResult>),
}

/// Whether the server refused the credential (401 with a challenge) somewhere in `error`.
pub fn unauthorized(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(current) = source {
        if current.downcast_ref::<AuthRequiredError>().is_some() {
            return true;
        }
        source = current.source();
    }
    false
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

/// A server's JSON-RPC error as the client gets it: its code and message, with `data` naming
/// the server. (A `-32042` never comes here: it is relayed as the server's page,
/// [`super::pages`].)
pub(super) fn passed_on(entry: &ServerEntry, error: ErrorData) -> ErrorData {
    ErrorData::new(error.code, error.message, Some(json!({"server": entry.row.name.as_str()})))
}
