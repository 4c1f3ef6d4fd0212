//! `resources/list` of the servers that act as the user (`provider`, `mcp-oauth`,
//! `token-exchange`): each user's own.
//!
//! A resource is data, not a description: such a server may list one user's notes or file
//! names. So its resources are read over the listing user's own connection, with that user's
//! credential, each time their client lists — never cached for the server, stored for other
//! instances, or shown to another user. (Its templates are patterns, and are listed from the
//! server's shared list, [`super::lists`], as its tools and prompts are.)
//!
//! Listing asks nothing of the user: a user who has not approved this client for the server,
//! or whose credential is not ready (not connected, scopes missing, the provider away), sees
//! none of its resources; the first call or read sends them to the broker's page. A server that
//! does not answer within [`LIST_WAIT`] is left out of this answer (logged), not waited for.
//! Only servers whose resources a read found offered are asked.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use rmcp::RoleServer;
use rmcp::model::Resource;
use rmcp::service::RequestContext;
use secrecy::ExposeSecret;

use super::Gateway;
use super::call::{provider_credential, shared_credential};
use super::listed::ServerResources;
use super::registry::ServerEntry;
use super::transport::Credential;
use crate::broker::access::{Standing, standing};
use crate::broker::gateway_consent;
use crate::mcp::handler::{BrokerServer, Caller};
use crate::store::gateway_servers::GatewayAuth;

/// The longest a list waits for one server's answer (or `gateway.call_timeout`, if shorter).
pub const LIST_WAIT: Duration = Duration::from_secs(5);

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

    /// The caller's resources on `entry`; none if they cannot be read without asking the user.
    async fn own_resources_on(
        &self,
        gateway: &Arc<Gateway>,
        entry: &Arc<ServerEntry>,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
    ) -> Vec<Resource> {
        let Some(credential) = self.ready_credential(gateway, entry, caller).await else { return Vec::new() };
        let key = gateway.pool.key(&caller.user, entry);
        let Ok(connection) = self.connection(gateway, entry, &key, credential, caller, ctx).await else {
            return Vec::new();
        };
        let wait = LIST_WAIT.min(self.state.config.gateway.call_timeout);
        let read = connection.service.peer().list_all_resources();
        let resources = tokio::select! {
            _ = ctx.ct.cancelled() => return Vec::new(),
            read = tokio::time::timeout(wait, read) => read,
        };
        match resources {
            Ok(Ok(resources)) => ServerResources::new(&entry.row.name, resources, Vec::new()).resources,
            Ok(Err(error)) => {
                tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "a server's resources/list for a user failed; left out of the list");
                Vec::new()
            }
            Err(_) => {
                tracing::warn!(server = %entry.row.name, "a server's resources/list for a user did not answer in time; left out of the list");
                Vec::new()
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
        match gateway_consent::approved(&self.state, &user.user_id, &user.client, &entry.row.id).await {
            Ok(true) => {}
            Ok(false) => return None,
            Err(error) => {
                tracing::warn!(server = %entry.row.name, %error, "could not read whether a client may call a server; its resources are left out of the list");
                return None;
            }
        }
        if let Some((provider_id, scopes, ..)) = entry.row.auth.user_credential() {
            let provider = self.state.providers.get(provider_id)?;
            return match standing(&self.state, &user.user_id, &user.client, &provider, None, scopes).await {
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
                .token_for(&self.state.identity, &self.state.store, user, &entry.row.id, service_id)
                .await;
            return match minted {
                Ok(token) => Some(Credential::new("Authorization", &format!("Bearer {}", token.expose_secret()))),
                Err(error) => {
                    tracing::debug!(server = %entry.row.name, %error, "no token for a server's resources/list");
                    None
                }
            };
        }
        Some(shared_credential(entry))
    }
}
