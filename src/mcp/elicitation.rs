//! URL-mode elicitation (MCP 2025-11-25 client/elicitation §URL mode, SEP-1036).
//!
//! The URL we send is always our own `/connect/{elicitationId}` page: it holds no user data and
//! is not pre-authenticated (the page requires the signed-in owner), so it is safe to show to a
//! client and a model. rmcp has no helper for `-32042` or `notifications/elicitation/complete`;
//! both are built here on its error and custom-notification types.

use rmcp::model::{CustomNotification, ErrorCode, ErrorData, ServerNotification};
use serde_json::json;

use crate::broker::authorizations;
use crate::broker::gateway_consent::server_named;
use crate::config::ProviderConfig;
use crate::domain::Scopes;
use crate::state::AppState;
use crate::store::authorizations::{AuthorizationKind, AuthorizationRow};

/// MCP's URLElicitationRequiredError code; used for nothing else.
pub const URL_ELICITATION_REQUIRED: ErrorCode = ErrorCode(-32042);
pub const COMPLETE_METHOD: &str = "notifications/elicitation/complete";

/// What the elicitation says, for either kind of row.
pub fn ask_message(row: &AuthorizationRow, provider: &ProviderConfig, scopes: &Scopes) -> String {
    match row.kind {
        AuthorizationKind::Connect => connect_message(provider, scopes),
        AuthorizationKind::Consent => use_message(provider, scopes),
        AuthorizationKind::Server => server_message(server_named(row)),
    }
}

/// A (client, server) approval: the server by its registered name.
pub fn server_message(server: &str) -> String {
    format!(
        "Allow this client to call the server {server} behind the broker. The broker asks before each client uses a server; nothing is sent to {server} for this client until you allow it."
    )
}

/// Said beside a connect or consent request that approves a server's pair too.
pub fn server_hint(server: &str) -> String {
    format!("Approving also lets this client call the server {server} behind the broker.")
}

/// `-32042` with one URL elicitation for a `server` row (no provider involved).
pub fn server_elicitation_required(state: &AppState, row: &AuthorizationRow) -> ErrorData {
    let server = server_named(row);
    ErrorData::new(
        URL_ELICITATION_REQUIRED,
        format!("This request requires your permission for this client to call the server {server}."),
        Some(json!({
            "elicitations": [{
                "mode": "url",
                "elicitationId": row.id,
                "url": authorizations::connect_url(&state.core, &row.id).as_str(),
                "message": server_message(server),
            }],
            "server": server,
        })),
    )
}

/// [`manual_connect_text`] for a `server` row.
pub fn manual_server_text(state: &AppState, row: &AuthorizationRow) -> String {
    let server = server_named(row);
    format!(
        "This client may not call the server {server} yet. {message} Open this link in your browser, sign in to the broker and approve: {url} — then call this tool again. (The link is valid for {minutes} minutes.)",
        message = server_message(server),
        url = authorizations::connect_url(&state.core, &row.id),
        minutes = state.core.config.authorization_ttl.as_secs() / 60,
    )
}

/// A consent-only request: the connection exists, this client may not use it yet.
pub fn use_message(provider: &ProviderConfig, scopes: &Scopes) -> String {
    let access = if scopes.is_empty() {
        String::new()
    } else {
        format!(" (access: {})", scopes.iter().collect::<Vec<_>>().join(", "))
    };
    format!(
        "Allow this client to use your existing {} connection{access}. The broker asks before each client uses a connection; nothing is sent to {} for this client until you allow it.",
        provider.display_name, provider.display_name
    )
}

pub fn connect_message(provider: &ProviderConfig, scopes: &Scopes) -> String {
    if scopes.is_empty() {
        format!("Connect your {} account so this tool can act on your behalf.", provider.display_name)
    } else {
        format!(
            "Connect your {} account (access: {}) so this tool can act on your behalf.",
            provider.display_name,
            scopes.iter().collect::<Vec<_>>().join(", ")
        )
    }
}

/// `-32042` with one URL elicitation in `data.elicitations`.
pub fn url_elicitation_required(
    state: &AppState,
    row: &AuthorizationRow,
    provider: &ProviderConfig,
    scopes: &Scopes,
) -> ErrorData {
    let headline = match row.kind {
        AuthorizationKind::Connect => {
            format!("This request requires connecting your {} account.", provider.display_name)
        }
        AuthorizationKind::Consent => {
            format!(
                "This request requires your permission for this client to use your {} connection.",
                provider.display_name
            )
        }
        AuthorizationKind::Server => {
            format!("This request requires your permission for this client to call the server {}.", server_named(row))
        }
    };
    ErrorData::new(
        URL_ELICITATION_REQUIRED,
        headline,
        Some(json!({
            "elicitations": [{
                "mode": "url",
                "elicitationId": row.id,
                "url": authorizations::connect_url(&state.core, &row.id).as_str(),
                "message": ask_message(row, provider, scopes),
            }],
            "provider": provider.id.as_str(),
        })),
    )
}

/// Text for clients that cannot open URLs by elicitation: safe to show, since the page demands
/// the signed-in owner.
pub fn manual_connect_text(
    state: &AppState,
    row: &AuthorizationRow,
    provider: &ProviderConfig,
    scopes: &Scopes,
) -> String {
    let situation = match row.kind {
        AuthorizationKind::Connect => format!("Not connected to {} yet.", provider.display_name),
        AuthorizationKind::Consent => {
            format!("This client may not use your {} connection yet.", provider.display_name)
        }
        AuthorizationKind::Server => format!("This client may not call the server {} yet.", server_named(row)),
    };
    format!(
        "{situation} {message} Open this link in your browser, sign in to the broker and approve: {url} — then call this tool again. (The link is valid for {minutes} minutes.)",
        message = ask_message(row, provider, scopes),
        url = authorizations::connect_url(&state.core, &row.id),
        minutes = state.core.config.authorization_ttl.as_secs() / 60,
    )
}

pub fn complete_notification(elicitation_id: &str) -> ServerNotification {
    ServerNotification::CustomNotification(CustomNotification::new(
        COMPLETE_METHOD,
        Some(json!({ "elicitationId": elicitation_id })),
    ))
}
