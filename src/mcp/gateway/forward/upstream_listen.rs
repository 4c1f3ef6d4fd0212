//! A subscription to a stateless 2026-07-28 server's resource: such a server has no
//! `resources/subscribe` and no standing stream, so the broker sends it a
//! `subscriptions/listen` of its own naming the resource, over the user's connection and after
//! the gates, one per URI per connection whatever the number of the user's sessions holding it,
//! and passes the updates on that listen's stream on as a 2025-11-25 server's
//! ([`crate::mcp::gateway::upstream::client::UpstreamHandler::pass_on_listened_update`]); the
//! last holder to let go cancels it ([`super::subscribe`]).

// `resources/subscribe` is legacy in rmcp (2026-07-28 has `subscriptions/listen`).
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::model::{ErrorData, ServerResult, SubscriptionFilter};
use rmcp::service::ServiceError;
use serde_json::json;

use super::failure::{Failure, server_error};
use super::forwarded::{Answer, Forward};
use crate::mcp::gateway::upstream::client::UpstreamHandler;
use crate::mcp::gateway::upstream::credential::unauthorized;
use crate::mcp::gateway::upstream::pool::Upstream;

/// A subscription to the server's resource `uri` over the user's `connection` (the gates
/// passed): a `subscriptions/listen` of the broker's naming it, unless one already listens on
/// this connection, answered as the server's empty `resources/subscribe` result once the server
/// acknowledged it.
pub(crate) async fn listen_upstream(
    forward: &Forward<'_>,
    connection: &Arc<Upstream>,
    uri: &str,
) -> Result<Answer, Failure> {
    let (gateway, entry) = (forward.gateway, forward.entry);
    let handler = connection.service.service();
    if !handler.subscribed.listening(uri) {
        let filter = SubscriptionFilter::builder().resource_subscription(uri).build();
        let limit = gateway.app.core.config.gateway.call_timeout;
        let subscription = match tokio::time::timeout(limit, connection.service.peer().listen(filter)).await {
            Ok(Ok(subscription)) => subscription,
            Ok(Err(ServiceError::McpError(error))) => return Ok(Answer::Plain(Err(server_error(entry, error)))),
            Ok(Err(error)) if unauthorized(&error) => return Err(Failure::Unauthorized),
            Ok(Err(error)) => {
                tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "a server behind the broker could not be listened to");
                gateway.pool.forget(&forward.key, connection);
                return Err(Failure::Unreachable);
            }
            Err(_) => {
                tracing::warn!(server = %entry.row.name, "a server behind the broker did not acknowledge a listen in time");
                return Err(Failure::Unreachable);
            }
        };
        let accepted = subscription.acknowledged().resource_subscriptions.iter().flatten().any(|u| u == uri);
        if !accepted {
            let text = format!("The server {} does not offer updates of this resource.", entry.row.name);
            let data = json!({"server": entry.row.name.as_str()});
            return Ok(Answer::Plain(Err(ErrorData::invalid_params(text, Some(data)))));
        }
        let task = tokio::spawn(hear_updates(subscription, handler.clone()));
        handler.subscribed.keep_listen(uri, task.abort_handle());
    }
    if let Some(sent_over) = forward.what.sent_over() {
        *sent_over.lock().unwrap_or_else(|p| p.into_inner()) = Some(connection.clone());
    }
    Ok(Answer::Plain(Ok(ServerResult::EmptyResult(().into()))))
}

/// Passes on the resource updates a stateless server sends on the broker's listen, until it
/// ends (the server ended it, the connection broke, or its last holder let go).
async fn hear_updates(mut subscription: rmcp::service::Subscription, handler: UpstreamHandler) {
    while let Ok(Some(notification)) = subscription.next().await {
        if let rmcp::model::ServerNotification::ResourceUpdatedNotification(updated) = notification {
            handler.pass_on_listened_update(&updated.params.uri);
        }
    }
}
