//! The registered servers kept current on this instance: read again when everyone's cache
//! generation moves (another instance or the CLI changed them) or, while it is not trusted, now
//! and then; a new server that needs no user's credential gets its tools read at once, over a
//! connection of no user's.

use std::sync::Arc;

use super::registry::{READ_ANYWAY_EVERY, ServerEntry, Servers, WATCH_EVERY};
use super::shared_lists::Changed;
use crate::mcp::gateway::state::Gateway;
use crate::mcp::gateway::upstream::credential::{Credential, CredentialCell};
use crate::store::gateway::ListKind;

impl Gateway {
    /// Reads the registered servers and applies the difference: new ones get an entry (and
    /// their tools, if no user's credential is needed to read them), removed ones lose their
    /// connections, changed ones get a new entry (and provider) with the lists read so far and
    /// new connections; listening clients hear of a changed tool list.
    pub async fn reload(self: &Arc<Self>) -> anyhow::Result<()> {
        let rows = self.app.core.store.gateway_servers().list().await?;
        let current = self.servers();
        let mut entries = Vec::new();
        let mut added = Vec::new();
        for row in rows {
            let earlier = current.by_id(&row.id);
            match earlier {
                // Compared whole, not by `updated_at` (seconds: two changes may share one).
                Some(entry) if entry.row == row => entries.push(entry.clone()),
                _ => {
                    if let Some(entry) = ServerEntry::load(row, &self.app.core.sealer) {
                        let entry = Arc::new(entry);
                        // Changed in place (its authorization server, `servers rediscover`; its
                        // secret, `keys rewrap`): the same server, whose lists stand; its
                        // connections are opened again.
                        match earlier {
                            Some(earlier) => entry.inherit(earlier),
                            None => added.push(entry.clone()),
                        }
                        entries.push(entry);
                    }
                }
            }
        }
        // Removed, or replaced by a changed row: their connections end.
        let removed: Vec<Arc<ServerEntry>> =
            current.iter().filter(|old| !entries.iter().any(|e| Arc::ptr_eq(e, old))).cloned().collect();
        if added.is_empty() && removed.is_empty() {
            return Ok(());
        }
        // `mcp-oauth` servers' authorization servers, as providers (before the servers are
        // served, so a user's first call finds its provider).
        self.app.core.providers.set_server_providers(entries.iter().filter_map(|e| e.provider()).collect());
        // What any instance read of the new ones, listed from the first request on.
        let stored = self.take_stored_lists(&added).await;
        let changed: Vec<bool> = removed.iter().map(|old| entries.iter().any(|e| e.row.id == old.row.id)).collect();
        *self.servers.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(Servers::new(entries));
        for (entry, changed) in removed.iter().zip(changed) {
            let closed = self.pool.close_server(&entry.row.id);
            if changed {
                tracing::info!(server = %entry.row.name, connections = closed, "a server behind the broker was changed; its connections open again");
            } else {
                tracing::info!(server = %entry.row.name, connections = closed, "a server behind the broker was removed");
            }
        }
        for entry in added {
            tracing::info!(server = %entry.row.name, auth = entry.row.auth.kind(), "a server behind the broker was added");
            if !entry.row.auth.per_user() {
                let gateway = self.clone();
                tokio::spawn(async move { gateway.fetch_shared_tools(&entry).await });
            }
        }
        self.tools_changed();
        self.tell_clients(Changed { tools: false, ..stored });
        Ok(())
    }

    /// A server that needs no user's credential: its tools are read once over a connection of
    /// no user's, closed after. A failure leaves its connect tool listed.
    async fn fetch_shared_tools(self: &Arc<Self>, entry: &Arc<ServerEntry>) {
        let cell = Arc::new(CredentialCell::default());
        cell.set(Credential::shared(entry));
        let opened =
            tokio::time::timeout(self.app.core.config.gateway.call_timeout, self.open(entry, cell, None)).await;
        match opened {
            Ok(Ok(connection)) => {
                self.fill_tools(entry, connection.service.peer()).await;
                self.fill_lists(entry, connection.service.peer()).await;
                connection.close();
            }
            Ok(Err(error)) => {
                tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "could not read a server's tools")
            }
            Err(_) => tracing::warn!(server = %entry.row.name, "a server did not answer in time to list its tools"),
        }
    }

    /// Reads the server's tools over `peer` into its entry; tells listening clients if they
    /// changed.
    pub(crate) async fn fill_tools(&self, entry: &ServerEntry, peer: &rmcp::Peer<rmcp::RoleClient>) -> bool {
        match tokio::time::timeout(self.app.core.config.gateway.call_timeout, peer.list_all_tools()).await {
            Ok(Ok(tools)) => {
                let answer = serde_json::to_string(&tools);
                let changed = entry.set_tools(tools);
                entry.read_done();
                if changed {
                    self.tools_changed();
                }
                if changed || entry.shared.not_stored(ListKind::Tools) {
                    self.share_list(entry, ListKind::Tools, answer).await;
                }
                true
            }
            Ok(Err(error)) => {
                tracing::warn!(server = %entry.row.name, %error, "a server's tools/list failed");
                false
            }
            Err(_) => {
                tracing::warn!(server = %entry.row.name, "a server's tools/list did not answer in time");
                false
            }
        }
    }

    /// Reloads when everyone's generation moves (or, while it is not trusted, now and then).
    pub(crate) fn watch(gateway: &Arc<Self>) {
        let every = crate::every::Every::new(gateway, WATCH_EVERY, gateway.app.shutdown.clone());
        let mut seen = gateway.app.core.store.cache_shared_generation();
        tokio::spawn(async move {
            let mut last_read = tokio::time::Instant::now();
            while let Some(gateway) = every.tick().await {
                let now_seen = gateway.app.core.store.cache_shared_generation();
                let due = match now_seen {
                    Some(_) => now_seen != seen,
                    None => last_read.elapsed() >= READ_ANYWAY_EVERY,
                };
                if !due {
                    continue;
                }
                match gateway.reload().await {
                    Ok(()) => {
                        seen = now_seen;
                        last_read = tokio::time::Instant::now();
                    }
                    Err(error) => {
                        tracing::warn!(error = %crate::error_chain::Chain(error.as_ref()), "could not read the servers behind the broker")
                    }
                }
            }
        });
    }
}
