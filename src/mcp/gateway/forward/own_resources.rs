//! `resources/list` of the servers that act as the user (`provider`, `mcp-oauth`,
//! `token-exchange`): each user's own.
//!
//! A resource is data, not a description: such a server may list one user's notes or file
//! names. So its resources are read over the listing user's own connection, with that user's
//! credential, each time their client lists — never cached for the server, stored for other
//! instances, or shown to another user. (Its templates are patterns, and are listed from the
//! server's shared list, [`crate::mcp::gateway::catalogue::lists`], as its tools and prompts are.)
//!
//! - **Listing asks nothing of the user:** a user who has not approved this client for the
//!   server, or whose credential is not ready (not connected, scopes missing, the provider
//!   away), sees none of its resources; the first call or read sends them to the broker's page.
//! - **Bounded:** all such servers are read at once, each within [`LIST_WAIT`] (or
//!   `gateway.call_timeout` if shorter) for the user's credential and again for the server's
//!   answer; one that does not answer is left out of this answer (logged), and out of that
//!   user's lists for [`PAUSE`](crate::mcp::gateway::catalogue::own_listing::PAUSE) after it did not answer them or
//!   could not be reached, so a server that is down costs each user one wait, not one per
//!   list; when the pause ends, their clients are told to list again.
//! - **Changes:** a server says its resources changed over one user's connection, but may have
//!   changed others' too; every session and listen on every instance is told to list again
//!   (`Signal::GatewayResourcesChanged`), once per [`GATHER`](crate::mcp::gateway::catalogue::own_listing::GATHER) however many connections heard it.
//!
//! Only servers whose resources a read found offered are asked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use rmcp::model::Resource;

use super::attempt::open_upstream;
use super::credential::ready_credential;
use super::failure::Failure;
use crate::events::Signal;
use crate::mcp::context::Context;
use crate::mcp::gateway::catalogue::listed::ServerResources;
use crate::mcp::gateway::catalogue::own_listing::PAUSE;
use crate::mcp::gateway::catalogue::registry::ServerEntry;
use crate::mcp::gateway::state::Gateway;
use crate::mcp::gateway::upstream::credential::{Credential, unauthorized};

/// The longest one server's part of a list takes (or `gateway.call_timeout`, if shorter).
pub const LIST_WAIT: Duration = Duration::from_secs(5);

/// Why a user's resources of a server were not read.
enum Skipped {
    /// The user must act first (approve, connect), or the server refused the credential.
    NotReady,
    /// The server could not be reached or did not answer: lists leave it out for a while.
    Unreachable,
}

/// The caller's own resources on every server that acts as the user, read at once.
pub(crate) async fn list(cx: Context<'_>, gateway: &Arc<Gateway>) -> Vec<Resource> {
    let servers = gateway.servers();
    let asked = servers.iter().filter(|entry| entry.row.auth.per_user() && entry.resources().offered);
    let reads = asked.map(|entry| resources_on(cx, gateway, entry));
    join_all(reads).await.into_iter().flatten().collect()
}

/// The caller's resources on `entry`; none if they cannot be read without asking the user, or
/// in time.
async fn resources_on(cx: Context<'_>, gateway: &Arc<Gateway>, entry: &Arc<ServerEntry>) -> Vec<Resource> {
    let user = cx.caller.user.user_id.as_str();
    if entry.own.paused(user, Instant::now()) {
        return Vec::new();
    }
    let wait = LIST_WAIT.min(cx.core.config.gateway.call_timeout);
    // The credential first, within the wait: one that is slow to refresh is the provider's
    // matter, and does not pause the server.
    let credential = tokio::select! {
        _ = cx.request.ct.cancelled() => return Vec::new(),
        credential = tokio::time::timeout(wait, ready_credential(cx, gateway, entry)) => credential,
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
    let read = read_resources(cx, gateway, entry, credential);
    let read = tokio::select! {
        _ = cx.request.ct.cancelled() => return Vec::new(),
        read = tokio::time::timeout(wait, read) => read,
    };
    match read {
        Ok(Ok(resources)) => resources,
        Ok(Err(Skipped::NotReady)) => Vec::new(),
        Ok(Err(Skipped::Unreachable)) => {
            pause(cx, entry, user);
            Vec::new()
        }
        Err(_) => {
            tracing::warn!(server = %entry.row.name, "a server did not answer a user's resources/list in time; their lists leave it out for a while");
            pause(cx, entry, user);
            Vec::new()
        }
    }
}

/// `user`'s lists leave `entry` out for the pause; when it ends, that user's clients are told to
/// list again (their list lacks the server's resources until they do).
fn pause(cx: Context<'_>, entry: &ServerEntry, user: &str) {
    entry.own.pause(user, Instant::now());
    let (events, server_id, user_id) = (cx.core.events.clone(), entry.row.id.clone(), user.to_owned());
    tokio::spawn(async move {
        tokio::time::sleep(PAUSE).await;
        events.signal(Signal::GatewayResourcesChanged { server_id, user_id: Some(user_id) });
    });
}

async fn read_resources(
    cx: Context<'_>,
    gateway: &Arc<Gateway>,
    entry: &Arc<ServerEntry>,
    credential: Option<Credential>,
) -> Result<Vec<Resource>, Skipped> {
    let key = gateway.pool.key(&cx.caller.user, entry);
    let connection = match open_upstream(cx, gateway, entry, &key, credential).await {
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
        Err(error) if unauthorized(&error) => Err(Skipped::NotReady),
        Err(error) => {
            tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "a server's resources/list for a user failed; left out of the list");
            gateway.pool.forget(&key, &connection);
            Err(Skipped::Unreachable)
        }
    }
}
