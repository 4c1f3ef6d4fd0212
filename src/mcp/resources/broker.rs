//! The broker's own resources: the calling user's connections and the provider catalogue.
//!
//! Both are views of rows already shown by `list_connections`, in the same shape, and never
//! carry token material: no token values, no sealed blobs, no key ids, no client secrets. The
//! entries are built field by field from the rows (never by serialising a row), so a column
//! added later does not leak here by accident.

use rmcp::model::{ErrorData, ReadResourceResult, Resource, ResourceContents, ResourceTemplate};
use serde_json::{Value, json};

use super::uri::{self, BrokerUri};
use crate::broker::connection_status::Status;
use crate::broker::connections;
use crate::config::{ProviderConfig, TokenAuthMethod};
use crate::domain::Scopes;
use crate::state::AppState;
use crate::store::grants::GrantRow;

const JSON: &str = "application/json";

/// The concrete resources, for `resources/list`.
pub fn resources() -> Vec<Resource> {
    vec![
        Resource::new(uri::CONNECTIONS, "connections")
            .with_title("Your connections")
            .with_description(
                "Every provider the broker knows and whether you are connected to it: status \
                 (connected, needs_reconsent, not_connected), account, granted scopes, expiry. \
                 Never token values. Subscribe to hear when a connection is made, refreshed, \
                 needs consent again or is removed.",
            )
            .with_mime_type(JSON),
        Resource::new(uri::PROVIDERS, "providers")
            .with_title("Provider catalogue")
            .with_description(
                "The providers you can connect: default scopes, API base URL, whether the broker \
                 can revoke tokens there, and whether you are connected.",
            )
            .with_mime_type(JSON),
    ]
}

/// The templates, for `resources/templates/list`.
pub fn templates(state: &AppState) -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(uri::CONNECTION_TEMPLATE, "connection")
            .with_title("One connection")
            .with_description(format!(
                "Your connection to one provider, as in broker://connections. Providers: {}.",
                state.core.providers.ids().join(", ")
            ))
            .with_mime_type(JSON),
    ]
}

/// Whether a well-formed broker URI names something that exists.
pub fn exists(state: &AppState, uri: &BrokerUri) -> bool {
    match uri {
        BrokerUri::Connections | BrokerUri::Providers => true,
        BrokerUri::Connection(id) => state.core.providers.get(id).is_some(),
    }
}

// MCP 2025-11-25 server/resources §Reading Resources.
pub async fn read(
    state: &AppState,
    user_id: &str,
    target: &BrokerUri,
    raw: &str,
) -> Result<ReadResourceResult, ErrorData> {
    let body = match target {
        BrokerUri::Connections => {
            let grants = connections::all_accounts(&state.core, user_id).await.map_err(internal)?;
            let connections: Vec<Value> = state
                .core
                .providers
                .iter()
                .map(|p| connection_entry(&p, find(&grants, &p), state.core.now()))
                .collect();
            json!({ "connections": connections })
        }
        BrokerUri::Providers => {
            let grants = connections::all_accounts(&state.core, user_id).await.map_err(internal)?;
            let providers: Vec<Value> =
                state.core.providers.iter().map(|p| provider_entry(&p, find(&grants, &p))).collect();
            json!({ "providers": providers })
        }
        BrokerUri::Connection(id) => {
            let provider = state.core.providers.get(id).ok_or_else(|| uri::not_found(raw))?;
            let grant = connections::latest_account(&state.core, user_id, &provider).await.map_err(internal)?;
            connection_entry(&provider, grant.as_ref(), state.core.now())
        }
    };
    let text = serde_json::to_string_pretty(&body).map_err(internal)?;
    Ok(ReadResourceResult::new(vec![ResourceContents::text(text, raw).with_mime_type(JSON)]))
}

fn find<'a>(grants: &'a [GrantRow], provider: &ProviderConfig) -> Option<&'a GrantRow> {
    grants.iter().find(|g| g.provider == provider.id.as_str())
}

/// The core's status of `grant` for the user themself (no client, no required scopes).
fn state_of(grant: Option<&GrantRow>, now: i64) -> Status {
    Status::of(grant, now, &Scopes::default(), None)
}

fn status(grant: Option<&GrantRow>) -> &'static str {
    // The coarse status does not depend on the time.
    state_of(grant, 0).coarse().as_str()
}

/// One connection, in `list_connections`' shape plus `uri`, `updated_at` and `refreshable`.
fn connection_entry(provider: &ProviderConfig, grant: Option<&GrantRow>, now: i64) -> Value {
    let state = state_of(grant, now);
    let status = state.coarse().as_str();
    json!({
        "state": state.code(),
        "last_refresh_error": state.last_error().map(|e| e.as_str()),
        "next_refresh_at": state.retry_at(),
        "provider": provider.id.as_str(),
        "display_name": provider.display_name,
        "uri": uri::connection_uri(&provider.id),
        "connected": status == "connected",
        "status": status,
        "account": grant.and_then(|g| g.account_label.clone()),
        "scopes": grant.map(|g| g.scopes.iter().collect::<Vec<_>>()).unwrap_or_default(),
        "expires_at": grant.and_then(|g| g.expires_at),
        "updated_at": grant.map(|g| g.updated_at),
        // Whether the broker can renew the access token without asking the user again.
        "refreshable": grant.is_some_and(|g| g.refresh_token_sealed.is_some()),
    })
}

/// One provider as configured, public facts only (never the client id or secret), and this
/// user's status there.
fn provider_entry(provider: &ProviderConfig, grant: Option<&GrantRow>) -> Value {
    let status = status(grant);
    json!({
        "id": provider.id.as_str(),
        "display_name": provider.display_name,
        "default_scopes": provider.default_scopes,
        "api_base_url": provider.api_base_url.as_str(),
        "supports_revocation": provider.revocation_url.is_some(),
        "identifies_account": provider.userinfo_url.is_some(),
        "token_endpoint_auth_method": match provider.token_auth_method {
            TokenAuthMethod::ClientSecretBasic => "client_secret_basic",
            TokenAuthMethod::ClientSecretPost => "client_secret_post",
            TokenAuthMethod::None => "none",
        },
        "connected": status == "connected",
        "status": status,
        "connection_uri": uri::connection_uri(&provider.id),
    })
}

/// A store or encoding failure: logged here, shown to the client as a bare internal error (or
/// a retryable one when the database is away).
fn internal(error: impl std::error::Error + 'static) -> ErrorData {
    crate::mcp::failure::internal(&error, "reading a resource failed")
}
