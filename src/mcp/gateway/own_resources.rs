//! `resources/list` of the servers that act as the user (`provider`, `mcp-oauth`,
//! `token-exchange`): each user's own.
//!
//! A resource is data, not a description: such a server may list one user's notes or file
//! names. So its resources are read over the listing user's own connection, with that user's
//! credential, each time their client lists — never cached for the server, stored for other
//! instances, or shown to another user. (Its templates are patterns, and are listed from the
//! server's shared list, [`super::lists`], as its tools and prompts are.)
//!
//! - **Listing asks nothing of the user:** a user who has not approved this client for the
//!   server, or whose credential is not ready (not connected, scopes missing, the provider
//!   away), sees none of its resources; the first call or read sends them to the broker's page.
//! - **Bounded:** all such servers are read at once, each within [`LIST_WAIT`] (or
//!   `gateway.call_timeout` if shorter) for the user's credential and again for the server's
//!   answer; one that does not answer is left out of this answer (logged), and out of that
//!   user's lists for [`PAUSE`](super::own_listing::PAUSE) after it did not answer them or
//!   could not be reached, so a server that is down costs each user one wait, not one per
//!   list; when the pause ends, their clients are told to list again.
//! - **Changes:** a server says its resources changed over one user's connection, but may have
//!   changed others' too; every session and listen on every instance is told to list again
//!   (`Signal::GatewayResourcesChanged`), once per [`GATHER`] however many connections heard it.
//!
//! Only servers whose resources a read found offered are asked.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::future::join_all;
use rmcp::RoleServer;
use rmcp::model::Resource;
use rmcp::service::RequestContext;

use super::Gateway;
use super::call::{minted_credential, provider_credential, shared_credential};
use super::listed::ServerResources;
use super::plain::Failure;
use super::registry::ServerEntry;
use super::transport::Credential;
use crate::broker::access::{Standing, standing};
use crate::broker::gateway_consent;
use crate::events::Signal;
use crate::mcp::handler::{BrokerServer, Caller};
use crate::store::gateway::GatewayAuth;

/// The longest one server's part of a list takes (or `gateway.call_timeout`, if shorter).
pub const LIST_WAIT: Duration = Duration::from_secs(5);
/// How long announced changes are gathered into one signal.
pub const GATHER: Duration = Duration::from_millis(200);

/// Why a user's resources of a server were not read.
enum Skipped {
    /// The user must act first (approve, connect), or the server refused the credential.
    NotReady,
    /// The server could not be reached or did not answer: lists leave it out for a while.
    Unreachable,
}

impl Gateway {
    /// `user`'s lists leave `entry` out for the pause; when it ends, that user's clients are
    /// told to list again (their list lacks the server's resources until they do).
    fn pause_own_resources(self: &Arc<Self>, entry: &Arc<ServerEntry>, user: &str) {
        entry.own.pause(user, Instant::now());
        let (gateway, server_id, user_id) = (self.clone(), entry.row.id.clone(), user.to_owned());
        tokio::spawn(async move {
            tokio::time::sleep(super::own_listing::PAUSE).await;
            gateway.app.core.events.signal(Signal::GatewayResourcesChanged { server_id, user_id: Some(user_id) });
        });
    }

    /// A server that acts as the user said its resources changed, over one user's connection:
    /// every client is told to list again, once for what arrives within [`GATHER`].
    pub(super) fn own_resources_changed(self: &Arc<Self>, entry: &Arc<ServerEntry>) {
        if entry.own.change_pending.swap(true, Ordering::AcqRel) {
            return;
        }
        let (gateway, entry) = (self.clone(), entry.clone());
        tokio::spawn(async move {
            tokio::time::sleep(GATHER).await;
            entry.own.change_pending.store(false, Ordering::Release);
            gateway
                .app
                .core
                .events
                .signal(Signal::GatewayResourcesChanged { server_id: entry.row.id.clone(), user_id: None });
        });
    }
}

impl BrokerServer {
    /// The caller's own resources on every server that acts as the user, read at once.
    pub(crate) async fn gateway_own_resources(
        &self,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
    ) -> Vec<Resource> {
        let gateway = self.state.gateway.clone();
        let servers = gateway.servers();
        let asked = servers.iter().filter(|entry| entry.row.auth.per_user() && entry.resources().offered);
        let reads = asked.map(|entry| self.own_resources_on(&gateway, entry, caller, ctx));
        join_all(reads).await.into_iter().flatten().collect()
    }

    /// The caller's resources on `entry`; none if they cannot be read without asking the user,
    /// or in time.
    async fn own_resources_on(
        &self,
        gateway: &Arc<Gateway>,
        entry: &Arc<ServerEntry>,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
    ) -> Vec<Resource> {
        let user = caller.user.user_id.as_str();
        if entry.own.paused(user, Instant::now()) {
            return Vec::new();
        }
        let wait = LIST_WAIT.min(self.state.app.core.config.gateway.call_timeout);
        // The credential first, within the wait: one that is slow to refresh is the provider's
        // matter, and does not pause the server.
        let credential = tokio::select! {
            _ = ctx.ct.cancelled() => return Vec::new(),
            credential = tokio::time::timeout(wait, self.ready_credential(gateway, entry, caller)) => credential,
        };
        let credential = match credential {
            Ok(Some(credential)) => credential,
            Ok(None) => return Vec::new(),
            Err(_) => {
                tracing::warn!(server = %entry.row.name, "a user's credential for a server was not ready in time; its resources are left out of the list");
                return Vec::new();
            }
        };
        // Then the server, within the wait again.
        let read = self.read_own_resources(gateway, entry, caller, ctx, credential);
        let read = tokio::select! {
            _ = ctx.ct.cancelled() => return Vec::new(),
            read = tokio::time::timeout(wait, read) => read,
        };
        match read {
            Ok(Ok(resources)) => resources,
            Ok(Err(Skipped::NotReady)) => Vec::new(),
            Ok(Err(Skipped::Unreachable)) => {
                gateway.pause_own_resources(entry, user);
                Vec::new()
            }
            Err(_) => {
                tracing::warn!(server = %entry.row.name, "a server did not answer a user's resources/list in time; their lists leave it out for a while");
                gateway.pause_own_resources(entry, user);
                Vec::new()
            }
        }
    }

    async fn read_own_resources(
        &self,
        gateway: &Arc<Gateway>,
        entry: &Arc<ServerEntry>,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
        credential: Option<Credential>,
    ) -> Result<Vec<Resource>, Skipped> {
        let key = gateway.pool.key(&caller.user, entry);
        let connection = match self.connection(gateway, entry, &key, credential, caller, ctx).await {
            Ok(connection) => connection,
            Err(Failure::Unreachable) => return Err(Skipped::Unreachable),
            Err(_) => return Err(Skipped::NotReady),
        };
        let listed = connection.service.peer().list_all_resources().await;
        match listed {
            Ok(resources) => Ok(ServerResources::new(&entry.row.name, resources, Vec::new()).resources),
            Err(rmcp::ServiceError::McpError(error)) => {
                tracing::warn!(server = %entry.row.name, code = error.code.0, "a server answered a user's resources/list with an error; left out of the list");
                Err(Skipped::NotReady)
            }
            Err(error) if super::plain::unauthorized(&error) => Err(Skipped::NotReady),
            Err(error) => {
                tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "a server's resources/list for a user failed; left out of the list");
                gateway.pool.forget(&key, &connection);
                Err(Skipped::Unreachable)
            }
        }
    }

    /// The credential the caller's requests to `entry` carry, if it is ready without asking the
    /// user anything (`Some(None)`: the server needs none); `None` if the user must act first.
    async fn ready_credential(
        &self,
        gateway: &Arc<Gateway>,
        entry: &ServerEntry,
        caller: &Caller,
    ) -> Option<Option<Credential>> {
        let user = &caller.user;
        match gateway_consent::approved(&self.state.app.core, &user.user_id, &user.client, &entry.row.id).await {
            Ok(true) => {}
            Ok(false) => return None,
            Err(error) => {
                tracing::warn!(server = %entry.row.name, %error, "could not read whether a client may call a server; its resources are left out of the list");
                return None;
            }
        }
        if let Some((provider_id, scopes, ..)) = entry.row.auth.user_credential() {
            let provider = self.state.app.core.providers.get(provider_id)?;
            return match standing(&self.state.app.core, &user.user_id, &user.client, &provider, None, scopes).await {
                Ok(Standing::Ready(token)) => Some(provider_credential(&entry.row.auth, &token)),
                Ok(_) => None,
                Err(error) => {
                    tracing::warn!(server = %entry.row.name, %error, "could not read a user's credential for a server; its resources are left out of the list");
                    None
                }
            };
        }
        if let GatewayAuth::TokenExchange { service_id } = &entry.row.auth {
            let minted = gateway
                .minted
                .token_for(&self.state.app.identity, &self.state.app.core.store, user, &entry.row.id, service_id)
                .await;
            return match minted {
                Ok(token) => Some(minted_credential(&token)),
                Err(error) => {
                    tracing::debug!(server = %entry.row.name, %error, "no token for a server's resources/list");
                    None
                }
            };
        }
        Some(shared_credential(entry))
    }
}
