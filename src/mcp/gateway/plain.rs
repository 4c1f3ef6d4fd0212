//! One plain request (`prompts/get`, `resources/read`) over a user's connection to a server
//! behind the broker, and what the forwarded calls share about a server that did not answer:
//! why ([`Failure`]), how a refused credential is recognised ([`unauthorized`]), and the
//! cancellation sent upstream when the client gives up ([`CancelUpstream`]).

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, ErrorData, InputRequiredResult, ServerResult};
use rmcp::service::{RequestContext, ServiceError};
use rmcp::transport::streamable_http_client::AuthRequiredError;
use serde_json::json;

use super::Gateway;
use super::pool::{Connection, ConnectionKey};
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

/// One plain request over the user's `connection`, within `gateway.call_timeout`; cancelled
/// upstream when the client cancels. The server's JSON-RPC error comes back as an answer —
/// its code and message, with `data` naming the server ([`passed_on`]) — except a `-32042`,
/// which the gates decide on ([`super::call`]); a 2026-07-28 server's `InputRequiredResult`
/// comes back as its result, for [`super::rounds`] to relay. Over a connection to a 2026-07-28
/// server ([`super::revision`]) this is one self-contained request, as a tool call is.
pub async fn send(
    gateway: &Arc<Gateway>,
    entry: &ServerEntry,
    key: &ConnectionKey,
    connection: &Arc<Connection>,
    request: ClientRequest,
    ctx: &RequestContext<RoleServer>,
) -> Result<Result<ServerResult, ErrorData>, Failure> {
    let limit = gateway.app.config.gateway.call_timeout;
    let peer = connection.service.peer();
    let handle = match peer.send_request_with_option(request, rmcp::service::PeerRequestOptions::no_options()).await {
        Ok(handle) => handle,
        Err(error) => {
            tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "a request to a server behind the broker could not be sent");
            gateway.pool.forget(key, connection);
            return Err(Failure::Unreachable);
        }
    };
    let mut cancel = CancelUpstream::new(peer.clone(), handle.id.clone());
    let answer = tokio::select! {
        _ = ctx.ct.cancelled() => return Err(Failure::Cancelled),
        answer = tokio::time::timeout(limit, handle.await_response()) => answer,
    };
    match answer {
        Ok(Ok(result)) => {
            cancel.answered();
            Ok(Ok(result))
        }
        Ok(Err(ServiceError::McpError(error))) => {
            cancel.answered();
            if error.code == crate::mcp::elicitation::URL_ELICITATION_REQUIRED {
                let questions = Some(connection.service.service().questions.clone());
                return Err(Failure::ServerLink { error, questions });
            }
            Ok(Err(passed_on(entry, error)))
        }
        Ok(Err(error)) if unauthorized(&error) => Err(Failure::Unauthorized),
        Ok(Err(error)) => {
            tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "a request to a server behind the broker failed");
            gateway.pool.forget(key, connection);
            Err(Failure::Unreachable)
        }
        Err(_) => {
            tracing::warn!(server = %entry.row.name, "a request to a server behind the broker did not answer in time");
            Err(Failure::Unreachable)
        }
    }
}

/// A server's JSON-RPC error as the client gets it: its code and message, with `data` naming
/// the server. (A `-32042` never comes here: it is relayed as the server's page,
/// [`super::pages`].)
fn passed_on(entry: &ServerEntry, error: ErrorData) -> ErrorData {
    ErrorData::new(error.code, error.message, Some(json!({"server": entry.row.name.as_str()})))
}
