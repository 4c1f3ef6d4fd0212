//! A grant's sealed tokens: the context each is sealed under, opening the access token, and
//! what happens to a grant whose stored token no longer opens or whose refresh token the
//! provider rejected (it needs a new consent). Shared by handing out tokens ([`super::tokens`])
//! and refreshing them ([`super::refresh`]).

use std::time::Duration;

use secrecy::SecretString;

use super::core::Core;
use crate::crypto::SealContext;
use crate::domain::Scopes;
use crate::store::grants::{GrantRow, GrantStatus, RefreshFailure};

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("not connected to this provider")]
    NotConnected,
    #[error("the connection lacks scopes {}", missing.to_space_separated())]
    MissingScopes { granted: Scopes, missing: Scopes },
    #[error("the provider no longer accepts this connection; the user must connect again")]
    NeedsReconsent,
    /// The provider failed transiently, or its refresh is held back (backoff, the attempt
    /// cap): ask again after `retry_after`. Never a reason for a new consent.
    #[error("the provider is unavailable, try again later")]
    ProviderUnavailable { retry_after: Duration },
    #[error("the provider refused the request ({0})")]
    ProviderRefused(String),
    /// The provider's identity endpoint did not say which account the tokens are for; no
    /// grant is stored rather than one for an empty account.
    #[error("the provider did not say which account this is ({0})")]
    IdentityFailed(String),
    /// The database failed; [`crate::store::StoreError::is_unavailable`] says whether a
    /// retry may help (faces answer "temporarily unavailable" then).
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The grant's row changed identity under every attempt to store the tokens (disconnected
    /// and connected again, three times over): nothing was stored.
    #[error("the grant kept changing while it was stored")]
    KeptChanging,
    /// The detached refresh task panicked or was cancelled ([`super::refresh`]).
    #[error("the refresh task failed")]
    RefreshTask(#[from] tokio::task::JoinError),
}

/// A usable access token and the grant it came from.
pub struct AccessToken {
    pub token: SecretString,
    pub grant: GrantRow,
}

pub(super) fn owner(user_id: &str, provider: &str) -> String {
    format!("{user_id}/{provider}")
}

pub(super) fn access_ctx<'a>(grant_id: &'a str, owner: &'a str) -> SealContext<'a> {
    SealContext { table: "grants", column: "access_token", row_id: grant_id, owner }
}

pub(super) fn refresh_ctx<'a>(grant_id: &'a str, owner: &'a str) -> SealContext<'a> {
    SealContext { table: "grants", column: "refresh_token", row_id: grant_id, owner }
}

pub(super) async fn open_access(core: &Core, grant: GrantRow) -> Result<AccessToken, TokenError> {
    let owner = owner(&grant.user_id, &grant.provider);
    let opened = core
        .sealer
        .open(&grant.access_token_sealed, access_ctx(&grant.id, &owner))
        .map_err(|e| e.to_string())
        .and_then(|plain| String::from_utf8(plain).map_err(|_| "the access token is not UTF-8".to_owned()));
    match opened {
        Ok(token) => Ok(AccessToken { token: SecretString::from(token), grant }),
        Err(why) => Err(broken(core, &grant, "access token", &why).await),
    }
}

/// A stored token that no longer opens — a blob moved from another row, a flipped bit, a key
/// this instance no longer holds — makes the grant unusable, not the user stuck: it is marked
/// `needs_reconsent` (audited), so every face sends the user through a fresh connect link as
/// for a revoked grant, and the connection shows as needing consent.
pub(super) async fn broken(core: &Core, grant: &GrantRow, what: &str, why: &str) -> TokenError {
    tracing::error!(grant = %grant.id, provider = %grant.provider, %why, "a stored {what} could not be opened; the grant needs a new consent");
    match mark_needs_reconsent(core, grant, RefreshFailure::Unreadable, &format!("stored {what} could not be opened"))
        .await
    {
        Ok(_) => TokenError::NeedsReconsent,
        Err(error) => error,
    }
}

/// Marks the grant (as read at `grant.version`) for a new consent, noting `kind` for the
/// connection status. False when the row changed meanwhile (a new consent, or newer tokens
/// stored): then it stays as it is.
pub(super) async fn mark_needs_reconsent(
    core: &Core,
    grant: &GrantRow,
    kind: RefreshFailure,
    why: &str,
) -> Result<bool, TokenError> {
    let now = core.now();
    // Version-checked: a new consent that replaced this grant meanwhile stays active.
    let event = super::connection_events::needs_reauthorization(grant, why);
    if core
        .store
        .grants()
        .set_status(&grant.id, grant.version, GrantStatus::NeedsReconsent, Some(kind), now)
        .noting(Some(&event), now)
        .await?
    {
        core.store
            .audit()
            .record_implied(now, Some(&grant.user_id), "grant.needs_reconsent", Some(&grant.provider), Some(why))
            .await?;
        core.events.connections_changed(&grant.user_id, &grant.provider);
        return Ok(true);
    }
    Ok(false)
}

/// Providers' lifetimes are clamped to ten years: a huge `expires_in` must not overflow.
pub(super) fn expiry(now: i64, expires_in: Option<Duration>) -> Option<i64> {
    const TEN_YEARS: u64 = 10 * 365 * 24 * 3600;
    expires_in.map(|d| now.saturating_add(d.as_secs().min(TEN_YEARS) as i64))
}

/// [`super::provider_apps::for_grant`] for a call that needs the app to go on: an app that can no longer be built
/// (its version gone with a forgotten key, its secret unreadable) makes the grant need a new
/// consent, like a token that no longer opens, so the user connects again with the app in use.
pub(super) async fn app_or_reconnect(
    core: &Core,
    grant: &crate::store::grants::GrantRow,
    provider: &crate::config::ProviderConfig,
) -> Result<Option<std::sync::Arc<crate::config::ProviderConfig>>, TokenError> {
    match super::provider_apps::for_grant(core, grant, provider).await {
        Ok(app) => Ok(app),
        Err(super::provider_apps::AppError::Store(e)) => Err(TokenError::Store(e)),
        Err(why) => Err(broken(core, grant, "organization's app", &why.to_string()).await),
    }
}
