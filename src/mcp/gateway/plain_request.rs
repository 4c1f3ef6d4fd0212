//! One plain request (`prompts/get`, `resources/read`, `resources/subscribe`) over a user's
//! connection to a server behind the broker, waited on as a tool call is ([`super::flights`]:
//! the server's questions relayed in the client's era, the timeout, cancellation), and its end
//! as the gates take it.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::ClientRequest;
use rmcp::service::{RequestContext, ServiceError};

use super::Gateway;
use super::call::{Answer, SentOver};
use super::flights::Landing;
use super::plain::{Failure, passed_on, unauthorized};
use super::pool::{Connection, ConnectionKey};
use super::registry::ServerEntry;
use crate::mcp::handler::{BrokerServer, Caller};

impl BrokerServer {
    /// One plain request over the user's `connection`, within `gateway.call_timeout` (not
    /// counting the time the user takes to answer the server's questions, relayed as a tool
    /// call's are: [`super::flights`]); cancelled upstream when the client cancels. The server's
    /// JSON-RPC error comes back as an answer — its code and message, with `data` naming the
    /// server ([`passed_on`]) — except a `-32042`, which the gates decide on ([`super::call`]);
    /// a 2026-07-28 server's `InputRequiredResult` comes back as its result, for
    /// [`super::rounds`] to relay. Over a connection to a 2026-07-28 server
    /// ([`super::revision`]) this is one self-contained request, as a tool call is.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn send_plain(
        &self,
        gateway: &Arc<Gateway>,
        entry: &Arc<ServerEntry>,
        key: &ConnectionKey,
        connection: &Arc<Connection>,
        request: ClientRequest,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
        sent_over: Option<&SentOver>,
    ) -> Result<Answer, Failure> {
        // A stateless 2026-07-28 server has no `resources/subscribe`: a listen instead.
        if let ClientRequest::SubscribeRequest(subscribe) = &request
            && entry.revision.get() == Some(super::revision::Revision::Stateless)
        {
            return self.listen_upstream(gateway, entry, key, connection, &subscribe.params.uri, sent_over).await;
        }
        let limit = gateway.app.core.config.gateway.call_timeout;
        let request = match self.send_upstream(entry, connection, request, ctx, limit).await {
            Ok(request) => request,
            Err(error) => {
                tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "a request to a server behind the broker could not be sent");
                gateway.pool.forget(key, connection);
                return Err(Failure::Unreachable);
            }
        };
        let landing = self.fly(gateway, entry, caller, ctx, request).await?;
        plain_landing(gateway, entry, key, landing, sent_over)
    }
}

/// What an expired question's answer tells the client of a plain request to do.
pub const SEND_AGAIN: &str = "send the request again";

/// A plain request's end: the server's result or JSON-RPC error, or the broker's own answer in
/// a tool's shape. `sent_over`, when given, is told the connection the server answered on.
pub(super) fn plain_landing(
    gateway: &Arc<Gateway>,
    entry: &ServerEntry,
    key: &ConnectionKey,
    landing: Landing,
    sent_over: Option<&SentOver>,
) -> Result<Answer, Failure> {
    let (connection, answer) = match landing {
        Landing::Answered { connection, answer } => (connection, answer),
        Landing::Broker(result) => return Ok(Answer::Tool(result.into())),
    };
    let answer = match answer {
        Ok(result) => Ok(result),
        Err(ServiceError::McpError(error)) if error.code == crate::mcp::elicitation::URL_ELICITATION_REQUIRED => {
            let questions = Some(connection.service.service().questions.clone());
            return Err(Failure::ServerLink { error, questions });
        }
        Err(ServiceError::McpError(error)) => Err(passed_on(entry, error)),
        Err(error) if unauthorized(&error) => return Err(Failure::Unauthorized),
        Err(error) => {
            tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "a request to a server behind the broker failed");
            gateway.pool.forget(key, &connection);
            return Err(Failure::Unreachable);
        }
    };
    if let Some(sent_over) = sent_over {
        *sent_over.lock().unwrap_or_else(|p| p.into_inner()) = Some(connection);
    }
    Ok(Answer::Plain(answer))
}
