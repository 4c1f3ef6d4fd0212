//! `subscriptions/listen` (MCP 2026-07-28 basic/subscriptions): the one long-lived request on
//! which a stateless client hears what a 2025-11-25 session hears on its GET stream —
//! `notifications/prompts/list_changed`, `notifications/tools/list_changed` and
//! `notifications/resources/list_changed` (servers behind the broker) and `notifications/resources/updated` for its user's
//! resources, the broker's and those of servers behind it (subscribed to on each server while
//! the listen lasts, `crate::mcp::gateway::forward::subscribe`) — from the same source
//! ([`crate::events::Events::subscribe_signals`]).
//!
//! rmcp sends the acknowledgement (the accepted filter) before [`listen`] runs, and its sink
//! drops whatever the accepted filter does not name and tags the rest with the subscription id.
//! Updates are keyed by user first: a signal about another user's resources never reaches this
//! stream, whatever URIs it asked for.

use rmcp::model::{ErrorData, SubscriptionFilter};
use rmcp::service::{SubscriptionContext, SubscriptionSendError, SubscriptionSink};
use tokio::sync::broadcast::error::RecvError;

use crate::events::Signal;
use crate::mcp::state::McpState;

/// What the broker can deliver of `requested`: prompt, tool and resource list changes (servers
/// behind the broker change all three), and updates of resources it serves (unknown URIs are
/// left out, so the acknowledgement says what will really come).
pub fn accepted(state: &McpState, requested: &SubscriptionFilter) -> SubscriptionFilter {
    let mut accepted = SubscriptionFilter::builder();
    if requested.prompts_list_changed == Some(true) {
        accepted = accepted.prompts_list_changed();
    }
    // The servers behind the broker (gateway mode) change the tool list.
    if requested.tools_list_changed == Some(true) {
        accepted = accepted.tools_list_changed();
    }
    if requested.resources_list_changed == Some(true) {
        accepted = accepted.resources_list_changed();
    }
    for uri in requested.resource_subscriptions.iter().flatten() {
        if super::resources::known(state, uri) {
            accepted = accepted.resource_subscription(uri.clone());
        }
    }
    accepted.build()
}

/// Relays signals to the subscription of `user_id` until the client goes away (its request is
/// cancelled) or the server starts to stop (like a session's standalone stream); then rmcp
/// sends the final result, which tells the client to listen again, elsewhere.
/// `signals` is subscribed by the caller before anything the listen relays can change.
pub async fn listen(
    state: &McpState,
    user_id: &str,
    subscription: SubscriptionContext,
    mut signals: tokio::sync::broadcast::Receiver<Signal>,
) -> Result<(), ErrorData> {
    let sink = subscription.sink().clone();
    loop {
        let signal = tokio::select! {
            _ = subscription.cancelled() => return Ok(()),
            _ = state.app.draining.cancelled() => return Ok(()),
            signal = signals.recv() => signal,
        };
        let delivered = match signal {
            Ok(Signal::PromptsChanged) => deliver(sink.notify_prompt_list_changed().await),
            Ok(Signal::ToolsChanged) => deliver(sink.notify_tool_list_changed().await),
            Ok(Signal::ResourceListChanged) => deliver(sink.notify_resource_list_changed().await),
            Ok(Signal::GatewayResourcesChanged { user_id: changed_for, .. })
                if changed_for.as_deref().is_none_or(|changed_for| changed_for == user_id) =>
            {
                deliver(sink.notify_resource_list_changed().await)
            }
            Ok(
                Signal::ResourcesChanged { user_id: changed_for, uris }
                | Signal::ServerResourcesUpdated { user_id: changed_for, uris },
            ) if changed_for == user_id => resources_updated(&sink, subscription.accepted(), uris).await,
            Ok(
                Signal::ResourcesChanged { .. }
                | Signal::ServerResourcesUpdated { .. }
                | Signal::GatewayListsStored { .. }
                | Signal::GatewayResourcesChanged { .. },
            )
            | Err(RecvError::Lagged(_)) => true,
            Err(RecvError::Closed) => return Ok(()),
        };
        if !delivered {
            // The stream is gone; nothing more can reach the client.
            return Ok(());
        }
    }
}

async fn resources_updated(sink: &SubscriptionSink, accepted: &SubscriptionFilter, uris: Vec<String>) -> bool {
    let wanted = accepted.resource_subscriptions.as_deref().unwrap_or_default();
    for uri in uris.into_iter().filter(|uri| wanted.contains(uri)) {
        if !deliver(sink.notify_resource_updated(uri).await) {
            return false;
        }
    }
    true
}

/// False when the subscription's stream is closed. A notification the client did not ask for
/// is not an error: the sink leaves it out.
fn deliver(sent: Result<(), SubscriptionSendError>) -> bool {
    match sent {
        Ok(()) | Err(SubscriptionSendError::NotificationNotAccepted(_)) => true,
        Err(error) => {
            tracing::debug!(%error, "subscription stream closed");
            false
        }
    }
}
