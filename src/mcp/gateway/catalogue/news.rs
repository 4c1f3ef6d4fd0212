//! What the servers' connections report to the catalogue ([`ServerNews`], implemented by the
//! gateway): a server's list changed (read again over that connection; for a server that acts
//! as the user, its users are told to list their own resources again), a resource of its changed
//! (passed to the subscribed user's sessions under the gateway's URI), and its name for log
//! messages.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::{Peer, RoleClient};

use super::own_listing::GATHER;
use super::registry::ServerEntry;
use super::uri::wrap;
use crate::events::Signal;
use crate::mcp::gateway::state::Gateway;
use crate::mcp::gateway::upstream::client::ServerNews;
use crate::store::gateway::ListKind;

impl ServerNews for Gateway {
    fn server_name(&self, server_id: &str) -> Option<String> {
        self.servers().by_id(server_id).map(|entry| entry.row.name.as_str().to_owned())
    }

    fn resource_updated(&self, server_id: &str, user_id: String, uri: &str) {
        let Some(entry) = self.servers().by_id(server_id).cloned() else { return };
        let uri = wrap(&entry.row.name, uri);
        self.app.core.events.signal(Signal::ServerResourcesUpdated { user_id, uris: vec![uri] });
    }

    fn list_changed(self: Arc<Self>, server_id: &str, kind: ListKind, peer: Peer<RoleClient>) {
        let Some(entry) = self.servers().by_id(server_id).cloned() else { return };
        if kind == ListKind::Resources && entry.row.auth.per_user() {
            // Users' own resources are read when they list (`forward::own_resources`): only
            // telling them makes them list again. The read below covers the templates.
            own_resources_changed(&self, &entry);
        }
        tokio::spawn(async move {
            match kind {
                ListKind::Tools => {
                    self.fill_tools(&entry, &peer).await;
                }
                ListKind::Prompts => self.fill_prompts(&entry, &peer).await,
                ListKind::Resources => self.fill_resources(&entry, &peer).await,
            }
        });
    }
}

/// A server that acts as the user said its resources changed, over one user's connection: every
/// client is told to list again, once for what arrives within [`GATHER`].
fn own_resources_changed(gateway: &Gateway, entry: &Arc<ServerEntry>) {
    if entry.own.change_pending.swap(true, Ordering::AcqRel) {
        return;
    }
    let (events, entry) = (gateway.app.core.events.clone(), entry.clone());
    tokio::spawn(async move {
        tokio::time::sleep(GATHER).await;
        entry.own.change_pending.store(false, Ordering::Release);
        events.signal(Signal::GatewayResourcesChanged { server_id: entry.row.id.clone(), user_id: None });
    });
}
