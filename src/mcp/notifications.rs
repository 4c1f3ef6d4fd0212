//! What a session hears that relates to no open request, relayed once per session on its
//! standalone (GET) stream: `notifications/elicitation/complete` for the elicitations this
//! session started (MCP 2025-11-25 client/elicitation: "only to the client that started the
//! elicitation"), `prompts/list_changed`, `tools/list_changed`, `resources/list_changed` and
//! `resources/updated` for the catalogue, this user's resources and the servers behind the
//! broker.
//!
//! They are sent through the session itself, not a handler's peer, so they reach it while it is
//! parked; the relay ends when the session does.

use std::sync::Arc;

use rmcp::model::{ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerNotification};
use tokio::sync::broadcast::error::RecvError;

use super::elicitation::complete_notification;
use super::session::scope::SessionScope;
use super::state::McpState;
use crate::events::Signal;

/// Starts the session's relay for `user_id`, once: a later call for the same session, or a
/// request without a session, does nothing.
pub fn relay_to_session(mcp: &McpState, scope: &Arc<SessionScope>, user_id: &str) {
    if scope.session_id.is_none() || scope.listener.set(()).is_err() {
        return;
    }
    let scope = scope.clone();
    let mut events = mcp.app.core.events.subscribe();
    let mut signals = mcp.app.core.events.subscribe_signals();
    let user_id = user_id.to_owned();
    tokio::spawn(async move {
        loop {
            let sent = tokio::select! {
                _ = scope.cancel.cancelled() => break,
                event = events.recv() => match event {
                    Ok(event) => {
                        // Keyed by user first, then by the session's own elicitations.
                        let ours = event.user_id == user_id && scope.take_elicitation(&event.authorization_id);
                        if !ours { continue; }
                        scope.notify(complete_notification(&event.authorization_id))
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
