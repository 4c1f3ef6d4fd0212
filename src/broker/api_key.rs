//! Connections made with an API key or personal access token instead of OAuth
//! ([`crate::providers::api_key`] says how the provider takes and checks one).
//!
//! ```text
//! connect page POST (owner, CSRF, pending) ─ connect ──▶ key's shape → test request at the
//!     provider (validate) → refused? the provider's reason, nothing stored, the link still open
//!     → sealed into the grant like an access token (no refresh, no expiry) → row completed,
//!       the asking client allowed, event — exactly as a callback finishes an OAuth connect
//! /connections POST ─ replace ──▶ the same check, then the grant's key replaced
//! provider 401 on a call ─ rejected ──▶ the grant needs a new key (needs_reconsent)
//! ```
//!
//! The key is a secret like a token: it is never logged, never in an error, never shown again
//! (pages show [`crate::providers::api_key::hint`] at most).

use std::time::Duration;

use secrecy::SecretString;

use super::core::Core;
use super::flow::{self, Connected, FlowError};
use super::tokens::{self, TokenError};
use crate::config::ProviderConfig;
use crate::identity::browser::BrowserSession;
use crate::providers::api_key::{self, KeyFormatError};
use crate::providers::client::TokenSet;
use crate::providers::token_response::{self, AccountRef};
use crate::store::authorizations::ConnectCompleted;
use crate::store::authorizations::{AuthorizationKind, AuthorizationRow};
use crate::store::grants::{GrantRow, RefreshFailure};

/// The most of a validation answer read (for the account's id and label).
const MAX_VALIDATION_BODY: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key cannot be a key (empty, spaces, too long); nothing was sent anywhere.
    #[error("{0}")]
    Format(#[from] KeyFormatError),
    /// The provider refused the key; its reason (the key taken out), safe to show.
    #[error("the provider refused this key: {reason}")]
    Refused { reason: String, looks_right: bool },
    /// The provider could not check the key now (down, slow, rate limited): nothing stored.
    #[error("the provider could not check the key right now")]
    Unavailable,
    /// The provider accepted the key but its answer did not name the account.
    #[error("the provider did not say which account this key is for")]
    NoAccount,
    /// Not an API-key provider, or not this row (owner, state, expiry): as the OAuth flow says.
    #[error(transparent)]
    Flow(#[from] FlowError),
    #[error(transparent)]
    Token(#[from] TokenError),
}

/// The owner entered a key on the connect page of `row`: checked, sealed, and the authorization
/// completed as a callback completes an OAuth one. A refused key leaves the row open, so the
/// user can paste the right one.
pub async fn connect(
    core: &Core,
    row: &AuthorizationRow,
    session: &BrowserSession,
    raw_key: &str,
) -> Result<Connected, KeyError> {
    flow::check_consent(core, row, session)?;
    if row.kind != AuthorizationKind::Connect {
        return Err(FlowError::NotActionable.into());
    }
    let provider = api_key_provider(core, &row.provider)?;
    let provider = &*provider;
    let key = api_key::check_key(raw_key)?;
    let account = validate(core, provider, &key).await?;
    let made_in = tokens::MadeIn { organization: &row.organization, app_id: None };
    let stored =
        tokens::store_grant(core, &row.user_id, provider, key_tokens(key, account), &row.scopes, made_in).await?;
    if super::consent::complete_connect(core, row, &stored.grant_id).await.map_err(TokenError::from)?
        == ConnectCompleted::FinishedMeanwhile
    {
        tracing::warn!(authorization_id = %row.id, "authorization was finished by someone else while the key was checked");
    }
    let now = core.now();
    let detail = format!("id={} credential=api_key", row.id);
    core.store
        .audit()
        .record_implied(now, Some(&row.user_id), "authorization.completed", Some(&row.provider), Some(&detail))
        .await
        .map_err(TokenError::from)?;
    tracing::info!(authorization_id = %row.id, provider = %row.provider, "authorization completed with an API key");
    flow::publish(core, row, "completed");
    Ok(Connected {
        authorization_id: row.id.clone(),
        provider_id: provider.id.to_string(),
        provider_name: provider.display_name.clone(),
    })
}

/// The user replaced the key of one of their API-key connections (`/connections`). The new key
/// is checked first; a key for another account at the provider becomes that account's
/// connection and the replaced one goes, so the user ends with the key they entered.
pub async fn replace(core: &Core, user_id: &str, grant: &GrantRow, raw_key: &str) -> Result<(), KeyError> {
    if grant.user_id != user_id {
        return Err(FlowError::WrongUser.into());
    }
    let provider = api_key_provider(core, &grant.provider)?;
    let provider = &*provider;
    let key = api_key::check_key(raw_key)?;
    let account = validate(core, provider, &key).await?;
    let made_in = tokens::MadeIn { organization: &grant.organization, app_id: None };
    let stored = tokens::store_grant(core, user_id, provider, key_tokens(key, account), &grant.scopes, made_in).await?;
    if stored.grant_id != grant.id {
        tokens::disconnect_grant(core, provider, grant).await?;
    }
    let detail = format!("grant={} credential=api_key", stored.grant_id);
    core.store
        .audit()
        .record_implied(core.now(), Some(user_id), "grant.key_replaced", Some(&grant.provider), Some(&detail))
        .await
        .map_err(TokenError::from)?;
    Ok(())
}

/// The provider answered 401 to a call with this grant's key: the key no longer works and there
/// is nothing to refresh, so the connection needs a new key. Logged, never failing the call.
pub async fn rejected(core: &Core, grant: &GrantRow) {
    match super::sealed_grant::mark_needs_reconsent(
        core,
        grant,
        RefreshFailure::KeyRefused,
        "the provider refused the API key",
    )
    .await
    {
        Ok(true) => {
            tracing::info!(grant = %grant.id, provider = %grant.provider, "the provider refused an API key; the connection needs a new key")
        }
        Ok(false) => {}
        Err(error) => tracing::error!(grant = %grant.id, %error, "could not mark a refused API key"),
    }
}

/// What a page may show of an API-key grant's key: its last four characters ([`api_key::hint`]);
/// `None` for a grant of an OAuth provider or a key that no longer opens.
pub async fn hint(core: &Core, grant: &GrantRow) -> Option<String> {
    core.providers.find(&grant.provider).filter(|p| p.is_api_key())?;
    let opened = super::sealed_grant::open_access(core, grant.clone()).await.ok()?;
    Some(api_key::hint(&opened.token))
}

fn api_key_provider(core: &Core, id: &str) -> Result<std::sync::Arc<ProviderConfig>, FlowError> {
    let provider = core.providers.find(id).ok_or_else(|| FlowError::UnknownProvider(id.to_owned()))?;
    if !provider.is_api_key() {
        return Err(FlowError::NotActionable);
    }
    Ok(provider)
}

/// A key held like an access token that never expires and cannot be refreshed.
fn key_tokens(key: SecretString, account: Option<AccountRef>) -> TokenSet {
    TokenSet { access_token: key, refresh_token: None, expires_in: None, scopes: None, api_base_url: None, account }
}

/// Asks the provider whether `key` is good, when its entry says how: the account it names
/// (if the entry says where), or why not.
async fn validate(core: &Core, provider: &ProviderConfig, key: &SecretString) -> Result<Option<AccountRef>, KeyError> {
    let Some(spec) = &provider.api_key else { return Err(FlowError::NotActionable.into()) };
    let Some(check) = &spec.validation else { return Ok(None) };
    let url = provider.api_base_url.join(&check.path).map_err(|_| KeyError::Unavailable)?;
    let mut request =
        provider.with_credential(core.http.request(check.method.clone(), url), key).timeout(Duration::from_secs(10));
    if let Some(agent) = &provider.user_agent {
        request = request.header(reqwest::header::USER_AGENT, agent);
    }
    for (name, value) in &provider.api_headers {
        request = request.header(name, value);
    }
    let sent = crate::telemetry::api_call(provider.id.as_str(), request.send(), |r| r.status().as_u16()).await;
    let mut response = sent.map_err(|error| {
        tracing::warn!(provider = %provider.id, error = %crate::error_chain::Chain(&error.without_url()), "the key could not be checked");
        KeyError::Unavailable
    })?;
    let status = response.status().as_u16();
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_VALIDATION_BODY {
            break;
        }
    }
    let good = if check.valid_statuses.is_empty() {
        (200..300).contains(&status)
    } else {
        check.valid_statuses.contains(&status)
    };
    if !good {
        if status == 429 || status >= 500 {
            tracing::warn!(provider = %provider.id, status, "the provider could not check a key now");
            return Err(KeyError::Unavailable);
        }
        let reason = api_key::refusal_reason(status, &body, key);
        tracing::info!(provider = %provider.id, status, "the provider refused a key");
        return Err(KeyError::Refused {
            reason,
            looks_right: spec.looks_right(secrecy::ExposeSecret::expose_secret(key)),
        });
    }
    let Some(id_field) = &provider.account_id_field else { return Ok(None) };
    let json: serde_json::Value = serde_json::from_slice(&body).map_err(|_| KeyError::NoAccount)?;
    let object = json.as_object().ok_or(KeyError::NoAccount)?;
    let field = |path: &str| token_response::lookup(object, path).and_then(token_response::scalar);
    let id = field(id_field).ok_or(KeyError::NoAccount)?;
    let label = provider.account_label_field.as_deref().and_then(field);
    Ok(Some(AccountRef { id, label }))
}
