//! Reading the servers' lists again, every `[gateway] list_refresh`.
//!
//! A server's tools, prompts and resources are cached ([`super::registry`], [`super::lists`])
//! and read again when the server says they changed. Two kinds of server cannot always say so:
//! - a stateless 2026-07-28 server has no connection to send a notification on;
//! - a 2025-11-25 server sends `notifications/…/list_changed` only over a session that is open,
//!   and a change made while every user's connection was closed as idle is never announced.
//!
//! So each server's lists are read again now and then over some user's open connection to it
//! (the lists are the same for every user, as [`super::lists`] assumes), and listening clients
//! hear `list_changed` when something did change. A server nobody has a connection to is left
//! alone: nobody is calling it, and reading it may need a user's credential.

use std::sync::Arc;

use crate::every::Every;
use crate::mcp::gateway::state::Gateway;

impl Gateway {
    /// Reads every server's lists again each `list_refresh`, until the app shuts down.
    pub(crate) fn start_refreshing(gateway: &Arc<Self>) {
        let every = Every::new(gateway, gateway.app.core.config.gateway.list_refresh, gateway.app.shutdown.clone());
        tokio::spawn(async move {
            while let Some(gateway) = every.tick().await {
                gateway.refresh_lists().await;
            }
        });
    }

    /// Each server with an open connection: its lists read again, all servers at once (each
    /// read is bounded by `call_timeout`).
    async fn refresh_lists(&self) {
        let servers = self.servers();
        let reads = servers.iter().filter_map(|entry| {
            let peer = self.pool.any_open_peer(&entry.row.id)?;
            Some(async move {
                if self.fill_tools(entry, &peer).await {
                    self.fill_lists(entry, &peer).await;
                }
            })
        });
        futures::future::join_all(reads).await;
    }
}
