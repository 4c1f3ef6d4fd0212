//! URL-mode elicitation (MCP 2025-11-25 client/elicitation §URL mode, SEP-1036).
//!
//! The URL we send is always our own `/connect/{elicitationId}` page: it holds no user data and
//! is not pre-authenticated (the page requires the signed-in owner), so it is safe to show to a
//! client and a model. rmcp has no helper for `-32042` or `notifications/elicitation/complete`;
//! both are built here on its error and custom-notification types.

use rmcp::model::{CustomNotification, ErrorCode, ErrorData, ServerNotification};
use serde_json::json;
use url::Url;

use crate::config::ProviderConfig;
use crate::domain::{ElicitationId, Scopes};
use crate::state::AppState;
use crate::store::StoreError;
use crate::store::authorizations::{AuthorizationRow, NewAuthorization};

/// MCP's URLElicitationRequiredError code; used for nothing else.
pub const URL_ELICITATION_REQUIRED: ErrorCode = ErrorCode(-32042);
pub const COMPLETE_METHOD: &str = "notifications/elicitation/complete";

/// Who asks, as far as an authorization row needs to know.
pub struct Requester<'a> {
    pub user_id: &'a str,
    pub client_name: Option<&'a str>,
    pub mcp_session: Option<&'a str>,
}

/// An open authorization for this user/provider/scopes/session, reused if one is still valid
/// so retries do not mint a new link each time.
pub async fn ensure_authorization(
    state: &AppState,
    who: &Requester<'_>,
    provider: &ProviderConfig,
    scopes: &Scopes,
) -> Result<AuthorizationRow, StoreError> {
    let now = state.now();
    let scope_text = scopes.to_space_separated();
    if let Some(row) =
        state.store.open_authorization(who.user_id, provider.id.as_str(), &scope_text, who.mcp_session, now).await?
    {
        return Ok(row);
    }
    let id = ElicitationId::generate();
    let new = NewAuthorization {
        id: id.as_str(),
        user_id: who.user_id,
        provider: provider.id.as_str(),
        scopes: &scope_text,
        client_name: who.client_name,
        mcp_session: who.mcp_session,
        expires_at: now + state.config.authorization_ttl.as_secs() as i64,
    };
    state.store.create_authorization(&new, now).await?;
    state
        .store
        .audit(now, Some(who.user_id), "authorization.created", Some(provider.id.as_str()), Some(&format!("id={id}")))
        .await?;
    state.store.authorization(id.as_str()).await?.ok_or(StoreError::Corrupt("authorization vanished".into()))
}

pub fn connect_url(state: &AppState, authorization_id: &str) -> Url {
    state.config.url(&format!("/connect/{authorization_id}"))
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
    ErrorData::new(
        URL_ELICITATION_REQUIRED,
        format!("This request requires connecting your {} account.", provider.display_name),
        Some(json!({
            "elicitations": [{
                "mode": "url",
                "elicitationId": row.id,
                "url": connect_url(state, &row.id).as_str(),
                "message": connect_message(provider, scopes),
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
    format!(
        "Not connected to {name} yet. {message} Open this link in your browser, sign in to the broker and approve: {url} — then call this tool again. (The link is valid for {minutes} minutes.)",
        name = provider.display_name,
        message = connect_message(provider, scopes),
        url = connect_url(state, &row.id),
        minutes = state.config.authorization_ttl.as_secs() / 60,
    )
}

pub fn complete_notification(elicitation_id: &str) -> ServerNotification {
    ServerNotification::CustomNotification(CustomNotification::new(
        COMPLETE_METHOD,
        Some(json!({ "elicitationId": elicitation_id })),
    ))
}
