//! Consent per client (MCP security best practices §Confused deputy).
//!
//! A connection (grant) belongs to a user, but each MCP client of that user must be allowed
//! to use it: the user's consent is recorded per (grant, client) with the scopes allowed, and a
//! client may use a grant only while its consent covers every scope the grant carries. So a new
//! client asks, and a client whose grant has gained scopes (another client asked for more) asks
//! again. Connecting through the provider records the consent for the client that asked; a
//! client that finds an existing connection gets a consent-only authorization (no trip to the
//! provider, see [`crate::broker::flow::allow`]).

use super::core::Core;
use crate::display::ClientName;
use crate::identity::ClientIdentity;
use crate::store::StoreError;
use crate::store::authorizations::AuthorizationRow;
use crate::store::grants::GrantRow;
use crate::store::webhooks::EventType;
use crate::store::{authorizations::ConnectCompleted, grants::NewConsent};

/// Whether `client` may use `grant` as it stands (its current scopes).
pub async fn client_may_use(core: &Core, client: &ClientIdentity, grant: &GrantRow) -> Result<bool, StoreError> {
    let Some(consent) = core.store.consents().find(&grant.id, &client.key()).await? else { return Ok(false) };
    Ok(consent.covers(&grant.scopes))
}

/// How every page names a client: the name it registered with the broker's authorization
/// server (with its id), or what its token says ([`ClientIdentity::name`]). Never the
/// self-reported `clientInfo` name alone, which any program can claim.
pub async fn client_name(core: &Core, client: &ClientIdentity) -> ClientName {
    if let ClientIdentity::OAuthClient(id) = client
        && core.config.identity.mode == crate::config::IdentityMode::Local
    {
        match core.store.oauth_clients().by_id(id).await {
            Ok(Some(row)) => return registered_client_name(row.client_name.as_deref(), id),
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "could not look up a client's registered name"),
        }
    }
    client.name()
}

/// [`client_name`] for each of `keys` (client keys; an empty one is a row from before the
/// broker recorded which client asks), with one query for the registered names.
pub async fn client_names<'a>(
    core: &Core,
    keys: impl Iterator<Item = &'a str>,
) -> std::collections::HashMap<String, ClientName> {
    let mut keys: Vec<&str> = keys.collect();
    keys.sort_unstable();
    keys.dedup();
    let local = core.config.identity.mode == crate::config::IdentityMode::Local;
    let ids: Vec<&str> = keys.iter().filter_map(|k| k.strip_prefix("client:")).filter(|_| local).collect();
    let registered: std::collections::HashMap<String, Option<String>> =
        match core.store.oauth_clients().names(&ids).await {
            Ok(rows) => rows.into_iter().collect(),
            Err(error) => {
                tracing::warn!(%error, "could not look up clients' registered names");
                Default::default()
            }
        };
    keys.into_iter()
        .map(|key| {
            let client = ClientIdentity::from_key(key);
            let name = match (&client, key) {
                (_, "") => ClientName::new("Unknown client", "asked before the broker recorded which client asks"),
                (ClientIdentity::OAuthClient(id), _) if registered.contains_key(id) => {
                    registered_client_name(registered[id].as_deref(), id)
                }
                _ => client.name(),
            };
            (key.to_owned(), name)
        })
        .collect()
}

/// An OAuth client by the name it registered (or its metadata document gave) and its id.
/// Anyone can register any name, so the kind says who chose it.
pub fn registered_client_name(registered: Option<&str>, client_id: &str) -> ClientName {
    match registered.map(str::trim).filter(|n| !n.is_empty()) {
        Some(name) => ClientName::new(name, format!("name chosen by the app itself; client id {client_id}")),
        None => ClientIdentity::OAuthClient(client_id.to_owned()).name(),
    }
}

/// After the provider flow of `row` stored `grant_id`: the row completes and, in the same
/// transaction, the client that asked may use the grant with exactly the scopes the consent page
/// listed — so whoever sees the row completed (a waiting tool call) finds the client allowed. If
/// the provider granted more (some return every scope ever granted), the client asks again
/// before the extra ones are used for it. Rows from before consents were per client (no client
/// key) record no consent.
pub async fn complete_connect(
    core: &Core,
    row: &AuthorizationRow,
    grant_id: &str,
) -> Result<ConnectCompleted, StoreError> {
    let now = core.now();
    let name = match row.client_key.is_empty() {
        true => None,
        false => Some(client_name(core, &ClientIdentity::from_key(&row.client_key)).await.to_string()),
    };
    let consent = name.as_deref().map(|name| NewConsent {
        authorization_id: &row.id,
        grant_id,
        user_id: &row.user_id,
        client_key: &row.client_key,
        client_name: Some(name),
        scopes: &row.scopes,
    });
    let event = super::connection_events::authorization(row, EventType::AuthorizationCompleted);
    let pair = super::pair_approval::pair_of(row, name.as_deref());
    let outcome = core
        .store
        .authorizations()
        .complete_connect(&row.id, &row.user_id, consent.as_ref(), pair.as_ref(), now)
        .noting(event.as_ref(), now)
        .await?;
    if matches!(outcome, ConnectCompleted::Completed { .. }) {
        super::pair_approval::audit_granted(core, row).await?;
    }
    match outcome {
        ConnectCompleted::Completed { consent_recorded: true } => {
            let detail = format!("id={} client={} scopes={}", row.id, row.client_key, row.scopes.to_space_separated());
            core.store
                .audit()
                .record_implied(now, Some(&row.user_id), "consent.granted", Some(&row.provider), Some(&detail))
                .await?;
        }
        ConnectCompleted::Completed { consent_recorded: false } if consent.is_some() => {
            tracing::warn!(authorization_id = %row.id, "the connection disappeared before its consent was recorded");
        }
        _ => {}
    }
    Ok(outcome)
}
