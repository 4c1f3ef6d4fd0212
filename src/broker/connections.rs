//! A user's connections as every face shows them: each configured provider with each account
//! the user holds there (or one "not connected" entry), its status
//! ([`super::connection_status::Status`], decided there once for every face), and whether a
//! given client may use it. `list_connections`, the `broker://` resources, the prompts, the forms and the
//! connections page all render this one listing; a tool that acts on one of the accounts at a
//! provider picks it from [`accounts`] or [`accounts_seen_by`].

use std::collections::HashSet;

use super::connection_status::Status;
use super::core::Core;
use crate::config::ProviderConfig;
use crate::domain::Scopes;
use crate::identity::ClientIdentity;
use crate::store::StoreError;
use crate::store::grants::GrantRow;

pub use super::connection_status::ConnectionStatus;

/// One entry of the listing.
#[derive(Debug)]
pub struct Connection {
    /// The provider's id (also for grants of a provider no longer configured).
    pub provider_id: String,
    /// `None` for a grant whose provider was removed from the configuration.
    pub provider: Option<std::sync::Arc<ProviderConfig>>,
    pub grant: Option<GrantRow>,
    /// The coarse status (`connected`, `needs_reconsent`, `not_connected`): `state.coarse()`.
    pub status: ConnectionStatus,
    /// Where the connection stands for the asking caller ([`Status::of`]).
    pub state: Status,
    /// The asking client may use this grant as it stands (its consent covers every scope).
    pub allowed_for_client: bool,
}

impl Connection {
    /// The provider's display name, or its id when it is no longer configured.
    pub fn provider_name(&self) -> &str {
        self.provider.as_deref().map(|p| p.display_name.as_str()).unwrap_or(&self.provider_id)
    }
}

/// Every configured provider with the user's accounts there (one "not connected" entry for a
/// provider without any), then grants at providers no longer configured. One query.
pub async fn connections(
    core: &Core,
    user_id: &str,
    client: Option<&ClientIdentity>,
) -> Result<Vec<Connection>, StoreError> {
    connections_requiring(core, user_id, client, &Scopes::default()).await
}

/// [`connections`], each with its status for a caller that requires `required` scopes.
pub async fn connections_requiring(
    core: &Core,
    user_id: &str,
    client: Option<&ClientIdentity>,
    required: &Scopes,
) -> Result<Vec<Connection>, StoreError> {
    let now = core.now();
    // With a client: each grant and that client's consent in one read.
    let (grants, allowed): (Vec<GrantRow>, HashSet<String>) = match client {
        Some(client) => {
            let read = core.store.grants().for_user_seen_by(user_id, &client.key()).await?;
            let allowed = read.iter().filter(|r| r.allowed()).map(|r| r.grant.id.clone()).collect();
            (read.iter().map(|r| r.grant.clone()).collect(), allowed)
        }
        None => (core.store.grants().for_user(user_id).await?, HashSet::new()),
    };
    let mut by_provider: Vec<(String, Vec<GrantRow>)> = Vec::new();
    for grant in grants {
        match by_provider.iter_mut().find(|(id, _)| *id == grant.provider) {
            Some((_, list)) => list.push(grant),
            None => by_provider.push((grant.provider.clone(), vec![grant])),
        }
    }
    let entry = |provider_id: &str, provider: Option<std::sync::Arc<ProviderConfig>>, grant: Option<GrantRow>| {
        let allowed_for_client = grant.as_ref().is_some_and(|g| allowed.contains(&g.id));
        let state = Status::of(grant.as_ref(), now, required, client.map(|_| allowed_for_client));
        Connection {
            provider_id: provider_id.to_owned(),
            provider,
            status: state.coarse(),
            state,
            allowed_for_client,
            grant,
        }
    };
    let mut listing = Vec::new();
    for provider in core.providers.iter() {
        let id = provider.id.as_str();
        match by_provider.iter().position(|(p, _)| p == id) {
            Some(i) => {
                let (_, grants) = by_provider.swap_remove(i);
                listing.extend(grants.into_iter().map(|g| entry(id, Some(provider.clone()), Some(g))));
            }
            None => listing.push(entry(id, Some(provider.clone()), None)),
        }
    }
    by_provider.sort_by(|a, b| a.0.cmp(&b.0));
    for (id, grants) in by_provider {
        listing.extend(grants.into_iter().map(|g| entry(&id, None, Some(g))));
    }
    Ok(listing)
}

/// The authorization that reconnects `grant` from the user's own connections page, opened for
/// the client the user most recently allowed to use it (the consent the new grant keeps; no
/// client gains anything it did not have). `None` when no client may use it: the user connects
/// again from the app that uses the connection, which asks for its own consent.
pub async fn reconnect(
    core: &Core,
    provider: &ProviderConfig,
    grant: &GrantRow,
) -> Result<Option<crate::store::authorizations::AuthorizationRow>, StoreError> {
    let consents = core.store.consents().for_user(&grant.user_id).await?;
    let Some(latest) = consents.iter().filter(|c| c.grant_id == grant.id).max_by_key(|c| c.updated_at) else {
        return Ok(None);
    };
    let client = ClientIdentity::from_key(&latest.client_key);
    let who = super::authorizations::Requester {
        user_id: &grant.user_id,
        client: &client,
        client_name: latest.client_name.as_deref(),
        mcp_session: None,
        server: None,
        // Reconnected where it was made, with that organization's app.
        organization: Some(&grant.organization),
    };
    let ask = super::authorizations::Ask::Connect;
    super::authorizations::open(core, &who, provider, &grant.scopes, ask).await.map(Some)
}

/// Every account the user holds at `provider`, by account name.
pub async fn accounts(core: &Core, user_id: &str, provider: &ProviderConfig) -> Result<Vec<GrantRow>, StoreError> {
    core.store.grants().at(user_id, provider.id.as_str()).await
}

/// [`accounts`] as `client` reads them: through that client's cached read of the user's grants,
/// the one [`super::access`] makes next, so picking an account and using it cost one read.
pub async fn accounts_seen_by(
    core: &Core,
    user_id: &str,
    provider: &ProviderConfig,
    client: &ClientIdentity,
) -> Result<Vec<GrantRow>, StoreError> {
    core.store.grants().at_seen_by(user_id, provider.id.as_str(), &client.key(), None).await
}

/// Every account the user holds, at any provider.
pub async fn all_accounts(core: &Core, user_id: &str) -> Result<Vec<GrantRow>, StoreError> {
    core.store.grants().for_user(user_id).await
}

/// The user's most recently updated account at `provider`.
pub async fn latest_account(
    core: &Core,
    user_id: &str,
    provider: &ProviderConfig,
) -> Result<Option<GrantRow>, StoreError> {
    core.store.grants().latest(user_id, provider.id.as_str(), None).await
}
