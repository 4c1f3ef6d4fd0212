//! A server's lists shared by every instance and kept across restarts.
//!
//! Each instance caches a server's tools, prompts and resources ([`super::registry`],
//! [`super::lists`]) and reads them from the server over a user's connection. Without more, an
//! instance none of whose users had connected to a per-user server listed only its connect tool,
//! so a client behind a load balancer saw the server's tools on one instance and not on the
//! next, and every instance forgot them on restart. So:
//! - a read that changes what this instance lists keeps the server's answer in the database
//!   (`store::gateway::lists`) and signals the other instances ([`Signal::GatewayListsStored`]);
//! - an instance that hears the signal reads the answer back and lists it, telling its own
//!   clients `list_changed` where their list changed;
//! - an instance that starts, or loads a server it did not serve before, lists what is stored
//!   for it at once.
//!
//! The lists stay the same for every user, as the rest of the gateway assumes. What is stored is
//! the server's own answer: each instance applies the prefix and URI scheme itself. A stored
//! answer that does not parse is left out (logged); the next read from the server replaces it.
//!
//! Each stored row has a version that moves on every write, and each entry remembers which
//! version its cached list is ([`super::list_versions`]): a row is taken only if it is newer, so a
//! signal heard late (this instance's own, or another's overtaken by a newer write) never takes
//! a list back. A write that fails marks the list as not stored, and the next read stores it
//! even if it did not change. Lists taken from the database are read from the server once per
//! process as well, over the first connection a user opens to it (`forward::attempt`), so a change
//! made while no instance held a connection is found.

use std::sync::{Arc, Weak};

use rmcp::model::{Prompt, Resource, ResourceTemplate, Tool};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;

use super::list_versions::NOT_STORED;
use super::listed::{ServerPrompts, ServerResources};
use super::registry::ServerEntry;
use crate::events::Signal;
use crate::mcp::gateway::state::Gateway;
use crate::store::gateway::{ListKind, StoredList};

/// A server's resources and templates, read together, as stored.
#[derive(Serialize, Deserialize)]
pub(crate) struct ResourcesAnswer {
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
}

/// Which lists changed for this instance's clients.
#[derive(Default, Clone, Copy)]
pub(crate) struct Changed {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
}

impl Changed {
    fn add(&mut self, other: Changed) {
        self.tools |= other.tools;
        self.prompts |= other.prompts;
        self.resources |= other.resources;
    }
}

impl Gateway {
    /// After a read from the server changed what this instance lists (or found a list this
    /// process could not store before): keeps `answer` (the server's answer as JSON) for every
    /// instance and tells them. A failure is logged and remembered: this instance lists the read
    /// anyway, and its next read stores it.
    pub(crate) async fn share_list(&self, entry: &ServerEntry, kind: ListKind, answer: serde_json::Result<String>) {
        let answer = match answer {
            Ok(answer) => answer,
            Err(error) => {
                tracing::warn!(server = %entry.row.name, list = kind.as_str(), %error, "a server's list could not be kept");
                entry.shared.set(kind, NOT_STORED);
                return;
            }
        };
        let now = self.app.core.clock.now();
        match self.app.core.store.gateway_lists().put(&entry.row.id, kind, &answer, now).await {
            Ok(Some(version)) => {
                entry.shared.set(kind, version);
                self.app.core.events.signal(Signal::GatewayListsStored { server_id: entry.row.id.clone() });
            }
            // Removed meanwhile: nothing to share.
            Ok(None) => {}
            Err(error) => {
                entry.shared.set(kind, NOT_STORED);
                tracing::warn!(server = %entry.row.name, list = kind.as_str(), %error, "a server's list could not be kept for the other instances; the next read tries again")
            }
        }
    }

    /// Lists what is stored for `entries` (servers this instance has just loaded), before they
    /// are served; what changed, for the clients to hear once they are served. A failed read
    /// leaves them to their first connection, as before lists were shared.
    pub(crate) async fn take_stored_lists(&self, entries: &[Arc<ServerEntry>]) -> Changed {
        let mut changed = Changed::default();
        if entries.is_empty() {
            return changed;
        }
        let stored = match self.app.core.store.gateway_lists().all().await {
            Ok(stored) => stored,
            Err(error) => {
                tracing::warn!(%error, "could not read the servers' stored lists; they are read from the servers");
                return changed;
            }
        };
        for entry in entries {
            changed.add(apply(entry, stored.iter().filter(|list| list.server_id == entry.row.id)));
        }
        changed
    }

    /// Reads back the lists of `server_id` (all servers' if `None`) after another instance (or
    /// this one) stored them; this instance's clients hear of what changed.
    async fn reread_stored_lists(&self, server_id: Option<&str>) {
        let stored = match server_id {
            Some(id) => self.app.core.store.gateway_lists().of(id).await,
            None => self.app.core.store.gateway_lists().all().await,
        };
        let stored = match stored {
            Ok(stored) => stored,
            Err(error) => {
                tracing::warn!(%error, "could not read a server's stored lists; its next read from the server updates them");
                return;
            }
        };
        let servers = self.servers();
        let mut changed = Changed::default();
        for entry in servers.iter().filter(|e| server_id.is_none_or(|id| e.row.id == id)) {
            changed.add(apply(entry, stored.iter().filter(|list| list.server_id == entry.row.id)));
        }
        self.tell_clients(changed);
    }

    /// `list_changed` to this instance's sessions and listening streams, for what changed.
    pub(crate) fn tell_clients(&self, changed: Changed) {
        if changed.tools {
            self.tools_changed();
        }
        if changed.prompts {
            self.app.core.events.signal(Signal::PromptsChanged);
        }
        if changed.resources {
            self.app.core.events.signal(Signal::ResourceListChanged);
        }
    }

    /// Reads back a server's lists whenever an instance signals it stored them, until the app
    /// shuts down.
    pub(crate) fn hear_stored_lists(gateway: &Arc<Self>) {
        let weak: Weak<Self> = Arc::downgrade(gateway);
        let mut signals = gateway.app.core.events.subscribe_signals();
        let stop = gateway.app.shutdown.clone();
        tokio::spawn(async move {
            loop {
                let signal = tokio::select! {
                    _ = stop.cancelled() => return,
                    signal = signals.recv() => signal,
                };
                let server_id = match signal {
                    Ok(Signal::GatewayListsStored { server_id }) => Some(server_id),
                    Ok(_) => continue,
                    // Some signals were missed: read every server's.
                    Err(RecvError::Lagged(_)) => None,
                    Err(RecvError::Closed) => return,
                };
                let Some(gateway) = weak.upgrade() else { return };
                gateway.reread_stored_lists(server_id.as_deref()).await;
            }
        });
    }
}

/// Lists the stored answers in `entry` that are newer than what it lists; which lists changed
/// for its clients.
fn apply<'a>(entry: &ServerEntry, stored: impl Iterator<Item = &'a StoredList>) -> Changed {
    let mut changed = Changed::default();
    for list in stored {
        if list.version <= entry.shared.get(list.kind) {
            continue;
        }
        // Taken even if it does not parse: a newer read replaces it, as it would a parsed one.
        entry.shared.set(list.kind, list.version);
        let unreadable = |error: serde_json::Error| {
            tracing::warn!(server = %entry.row.name, list = list.kind.as_str(), %error, "a server's stored list does not parse; left out");
        };
        match list.kind {
            ListKind::Tools => match serde_json::from_str::<Vec<Tool>>(&list.listed) {
                Ok(tools) => changed.tools |= entry.set_tools(tools),
                Err(error) => unreadable(error),
            },
            ListKind::Prompts => match serde_json::from_str::<Vec<Prompt>>(&list.listed) {
                Ok(prompts) => {
                    changed.prompts |=
                        entry.set_prompts(ServerPrompts::new(&entry.row.prefix, &entry.row.name, prompts))
                }
                Err(error) => unreadable(error),
            },
            ListKind::Resources => match serde_json::from_str::<ResourcesAnswer>(&list.listed) {
                Ok(answer) => {
                    // A row an older build stored (during a rolling upgrade, after migration
                    // 0038) may hold one user's resources: never listed, and written over by
                    // this instance's next read of the server.
                    let stale = entry.row.auth.per_user() && !answer.resources.is_empty();
                    let resources = entry.shared_resources(answer.resources);
                    let fresh = ServerResources::new(&entry.row.name, resources, answer.templates);
                    changed.resources |= entry.set_resources(fresh);
                    if stale {
                        entry.shared.set(ListKind::Resources, super::list_versions::NOT_STORED);
                    }
                }
                Err(error) => unreadable(error),
            },
        }
    }
    changed
}
