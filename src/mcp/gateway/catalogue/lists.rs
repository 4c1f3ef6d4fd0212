//! The prompts, resources and resource templates of the servers behind the broker, as the
//! client sees them beside the broker's own.
//!
//! Cached per server like its tools ([`super::registry`]) and never fetched per request: read
//! over the first connection any user opens to the server (or the one made at registration for
//! a server that needs no user's credential), and read again when that server says
//! `notifications/prompts/list_changed` or `notifications/resources/list_changed`, and every
//! `list_refresh` ([`super::reread`]) — a change the broker then passes on to its clients,
//! and keeps for the other instances and the next start (`super::shared_lists`)
//! (prompts lists are assumed the same for every user, as tool lists are). Only what the
//! server's capabilities offer is read.
//!
//! Resources are data, not descriptions: a server that acts as the user (`provider`,
//! `mcp-oauth`, `token-exchange`) may list one user's notes or files. Of such a server only the
//! templates are kept here; each user's resources are read over that user's own connection
//! when their client lists ([`crate::mcp::gateway::forward::own_resources`]).
//!
//! Names: a prompt is listed under the server's prefix, as its tools are (`notes_greeting`); a
//! resource or template under the server's name in the gateway's URI scheme ([`super::uri`]).

use std::sync::Arc;

use rmcp::model::{Prompt, Resource, ResourceTemplate};
use rmcp::{Peer, RoleClient};

use super::listed::{ServerPrompts, ServerResources};
use super::registry::ServerEntry;
use super::shared_lists::ResourcesAnswer;
use crate::events::Signal;
use crate::mcp::gateway::state::Gateway;
use crate::store::gateway::ListKind;

impl Gateway {
    /// What `prompts/list` adds after the broker's own: each server's prompts, leaving out any
    /// name `taken` already (the broker's own win).
    pub fn prompts(&self, taken: impl Fn(&str) -> bool) -> Vec<Prompt> {
        let mut listed = Vec::new();
        for entry in self.servers().iter() {
            let prompts = entry.prompts();
            for prompt in prompts.listed.iter() {
                if taken(&prompt.name) {
                    tracing::warn!(server = %entry.row.name, "a server's prompt has the name of one of the broker's; left out");
                    continue;
                }
                listed.push(prompt.clone());
            }
        }
        listed
    }

    /// What `resources/list` adds after the broker's own and the extensions', of servers that
    /// serve every user alike (the others': [`crate::mcp::gateway::forward::own_resources`]).
    pub fn resources(&self) -> Vec<Resource> {
        self.servers().iter().flat_map(|entry| entry.resources().resources.clone()).collect()
    }

    /// What `resources/templates/list` adds after the broker's own and the extensions'.
    pub fn templates(&self) -> Vec<ResourceTemplate> {
        self.servers().iter().flat_map(|entry| entry.resources().templates.clone()).collect()
    }

    /// The server, listed prompt and upstream name behind a listed prompt name.
    pub fn resolve_prompt(&self, name: &str) -> Option<(Arc<ServerEntry>, Prompt, String)> {
        let servers = self.servers();
        let entry = servers.iter().find(|e| name.starts_with(e.row.prefix.as_str()))?;
        let prompts = entry.prompts();
        let (prompt, upstream) = prompts.find(name)?;
        Some((entry.clone(), prompt.clone(), upstream.to_owned()))
    }

    /// The server and upstream URI behind a URI in the gateway's scheme; `None` if it names no
    /// registered server (or is malformed).
    pub fn resolve_resource(&self, uri: &str) -> Option<(Arc<ServerEntry>, String)> {
        let (name, upstream) = super::uri::unwrap(uri)?;
        let entry = self.servers().iter().find(|e| e.row.name == name)?.clone();
        Some((entry, upstream.to_owned()))
    }

    /// Whether `uri` names a resource of a registered server, so a subscription to it can be
    /// held (a 2025-11-25 server's `resources/subscribe`, a stateless one's listen).
    pub fn subscribable(&self, uri: &str) -> bool {
        self.resolve_resource(uri).is_some()
    }

    /// Reads whichever of the server's prompts and resources its capabilities offer.
    pub(crate) async fn fill_lists(&self, entry: &ServerEntry, peer: &Peer<RoleClient>) {
        let offered = peer.peer_info().map(|info| info.capabilities.clone()).unwrap_or_default();
        if offered.prompts.is_some() {
            self.fill_prompts(entry, peer).await;
        }
        if offered.resources.is_some() {
            self.fill_resources(entry, peer).await;
        }
    }

    /// Reads the server's prompts into its entry; tells listening clients if they changed.
    pub(crate) async fn fill_prompts(&self, entry: &ServerEntry, peer: &Peer<RoleClient>) {
        let limit = self.app.core.config.gateway.call_timeout;
        match tokio::time::timeout(limit, peer.list_all_prompts()).await {
            Ok(Ok(prompts)) => {
                let answer = serde_json::to_string(&prompts);
                let changed = entry.set_prompts(ServerPrompts::new(&entry.row.prefix, &entry.row.name, prompts));
                if changed {
                    self.app.core.events.signal(Signal::PromptsChanged);
                }
                if changed || entry.shared.not_stored(ListKind::Prompts) {
                    self.share_list(entry, ListKind::Prompts, answer).await;
                }
            }
            Ok(Err(error)) => tracing::warn!(server = %entry.row.name, %error, "a server's prompts/list failed"),
            Err(_) => tracing::warn!(server = %entry.row.name, "a server's prompts/list did not answer in time"),
        }
    }

    /// Reads the server's resources and templates into its entry; tells listening clients if
    /// they changed.
    pub(crate) async fn fill_resources(&self, entry: &ServerEntry, peer: &Peer<RoleClient>) {
        let limit = self.app.core.config.gateway.call_timeout;
        let read = async { Ok::<_, rmcp::ServiceError>((peer.list_all_resources().await?, templates(peer).await?)) };
        match tokio::time::timeout(limit, read).await {
            Ok(Ok((resources, templates))) => {
                // A server that acts as the user lists that user's own data: not kept, stored or
                // shown to anyone else; its templates are patterns.
                let resources = entry.shared_resources(resources);
                let answer = ResourcesAnswer { resources, templates };
                let stored = serde_json::to_string(&answer);
                let ResourcesAnswer { resources, templates } = answer;
                let changed = entry.set_resources(ServerResources::new(&entry.row.name, resources, templates));
                if changed {
                    self.app.core.events.signal(Signal::ResourceListChanged);
                }
                if changed || entry.shared.not_stored(ListKind::Resources) {
                    self.share_list(entry, ListKind::Resources, stored).await;
                }
            }
            Ok(Err(error)) => tracing::warn!(server = %entry.row.name, %error, "a server's resources/list failed"),
            Err(_) => tracing::warn!(server = %entry.row.name, "a server's resources/list did not answer in time"),
        }
    }
}

/// The server's resource templates; a server that has resources but answers
/// `resources/templates/list` with "method not found" simply has none.
async fn templates(peer: &Peer<RoleClient>) -> Result<Vec<ResourceTemplate>, rmcp::ServiceError> {
    match peer.list_all_resource_templates().await {
        Err(rmcp::ServiceError::McpError(error)) if error.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND => {
            Ok(Vec::new())
        }
        other => other,
    }
}
