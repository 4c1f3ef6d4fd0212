//! A call to a provider's API as the user: the one place the broker makes it, for every face —
//! `provider_request` over MCP, `/v1/proxy` for services, and whatever comes after them. The
//! face first gets the token through [`super::access`] (the client's consent, a refresh when
//! due), then hands it here with the request and translates the outcome; nothing here knows
//! rmcp or axum.
//!
//! The rules, in order:
//! 1. **Checked before any token** ([`ApiRequest::new`], in `request.rs`): one of six
//!    methods, a path that stays under the API base whatever its encoding, scalar query
//!    values, no body on GET or HEAD.
//! 2. **Where**: under the grant's own API base when the provider names one per grant
//!    (`api_base_from_token`, Salesforce `instance_url`; stored at connect and at each refresh
//!    that names one), else under the provider's `api_base_url` — the same checks either way.
//! 3. **Sent** with the user's token injected (`send.rs`); redirects are not followed.
//! 4. **A 401** for a token we believed valid (revoked server-side, rotated by another client,
//!    expired early): one forced refresh and one retry with the same request (its body is held
//!    in full, [`Body`]). The refresh goes through the one-at-a-time machinery
//!    ([`super::refresh`]): when several callers meet the 401 together, the first refreshes and
//!    the others find a stored token that differs from the one refused. A grant without a
//!    refresh token, or a refresh held back (backoff, the attempt cap) or failing transiently:
//!    the 401 is returned as it is. A second 401 too — no loop. But when the refresh ends in
//!    `invalid_grant` (the grant is then marked for a new consent), every call that met the
//!    401 — the one that refreshed and those waiting on it — ends in
//!    [`CallError::NeedsReconsent`], so its face hands out the reconnect link, not the
//!    provider's raw 401.
//! 5. **The answer** ([`ProviderAnswer`]): status, the headers worth showing, at most
//!    [`MAX_BODY_BYTES`] of body, with every token the call used replaced by `[redacted]`. A
//!    provider's 4xx or 5xx is an answer; [`CallError`] is for a call that got none.

mod request;
mod send;
#[cfg(test)]
mod tests;

use secrecy::SecretString;

pub use request::{ApiMethod, ApiRequest, Body, Query, RequestError};
pub use send::{MAX_BODY_BYTES, ProviderAnswer, Unreachable};

use super::refresh::{Want, refresh_grant};
use super::tokens::{AccessToken, TokenError};
use crate::broker::core::Core;
use crate::config::ProviderConfig;
use crate::store::StoreError;

/// Why a call got no answer from the provider. The texts of `Request` and `Unreachable` are
/// safe to show; `Store` is for the logs (faces answer it as their other database failures).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The path or query does not fit under the grant's own API base.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The provider could not be reached, did not answer in time, or broke off.
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
    /// Reading the grant's API base failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The provider refused the token and then its refresh (`invalid_grant`): the grant is
    /// marked for a new consent and only connecting again helps. Faces answer it as they answer
    /// a grant that needs a new consent (they ask [`super::access`] again, which opens the link).
    #[error("the provider no longer accepts this connection; the user must connect again")]
    NeedsReconsent,
}

/// Sends `request` as the user whose `token` the face obtained, retrying once after a 401.
pub async fn call(
    core: &Core,
    provider: &ProviderConfig,
    request: &ApiRequest<'_>,
    token: AccessToken,
) -> Result<ProviderAnswer, CallError> {
    // Called with the app that issued the grant's tokens: its API base and headers (an
    // organization's own tenant or domain, its client id in a header).
    let app = match super::sealed_grant::app_or_reconnect(core, &token.grant, provider).await {
        Ok(app) => app,
        Err(TokenError::Store(e)) => return Err(CallError::Store(e)),
        Err(_) => return Err(CallError::NeedsReconsent),
    };
    let provider = app.as_deref().unwrap_or(provider);
    let answer = send_with(core, provider, request, &token, None).await?;
    if answer.status != 401 {
        return Ok(answer);
    }
    match token_after_rejection(core, provider, &token).await {
        // Built again for the new token: a refresh may have named another API base.
        AfterRejection::Retry(fresh) => send_with(core, provider, request, &fresh, Some(&token.token)).await,
        AfterRejection::PassThrough => Ok(answer),
        AfterRejection::NeedsReconsent => Err(CallError::NeedsReconsent),
    }
}

/// What follows a 401.
enum AfterRejection {
    /// Send again with this token.
    Retry(Box<AccessToken>),
    /// The 401 is the answer.
    PassThrough,
    /// The grant is dead: the user must connect again.
    NeedsReconsent,
}

async fn send_with(
    core: &Core,
    provider: &ProviderConfig,
    request: &ApiRequest<'_>,
    token: &AccessToken,
    refused: Option<&SecretString>,
) -> Result<ProviderAnswer, CallError> {
    let base = grant_api_base(core, provider, token).await?;
    let url = request.url_under(base.as_ref())?;
    let sent = send::send(&core.http, provider, request, url, &token.token, refused);
    crate::telemetry::api_call(provider.id.as_str(), sent, |answer| answer.status).await.map_err(|error| {
        tracing::warn!(provider = %provider.id, error = %crate::error_chain::Chain(&error), "the provider's API did not answer");
        CallError::Unreachable(error)
    })
}

/// The API base `token`'s grant carries, `None` for the provider's own.
async fn grant_api_base(
    core: &Core,
    provider: &ProviderConfig,
    token: &AccessToken,
) -> Result<Option<url::Url>, StoreError> {
    if provider.api_base_from_token.is_none() {
        return Ok(None);
    }
    let stored = core.store.grants().account(&token.grant.id).await?;
    Ok(stored.and_then(|(_, base)| base).and_then(|base| url::Url::parse(&base).ok()))
}

/// What to do after the provider refused `rejected` with 401: retry with a new token, pass
/// the 401 on, or — the refresh ended in `invalid_grant`, here or in the refresh this call
/// waited for — say the grant needs a new consent.
async fn token_after_rejection(core: &Core, provider: &ProviderConfig, rejected: &AccessToken) -> AfterRejection {
    let grant = &rejected.grant;
    if provider.is_api_key() {
        // An API key has no refresh: the provider refusing it means the user must enter a new
        // one, so the connection says so from now on and this call, too, gets the link.
        super::api_key::rejected(core, grant).await;
        return AfterRejection::NeedsReconsent;
    }
    if grant.refresh_token_sealed.is_none() {
        tracing::info!(grant = %grant.id, provider = %grant.provider, "the provider refused a token that cannot be refreshed; 401 passed through");
        return AfterRejection::PassThrough;
    }
    match refresh_grant(core, provider, &grant.id, Want::Rejected(&rejected.token)).await {
        Ok(token) => {
            tracing::info!(grant = %grant.id, provider = %grant.provider, "the provider refused a token; retrying once with a refreshed one");
            AfterRejection::Retry(Box::new(token))
        }
        Err(TokenError::NeedsReconsent) => {
            tracing::info!(grant = %grant.id, provider = %grant.provider, "the provider refused a token and its refresh; the user must connect again");
            AfterRejection::NeedsReconsent
        }
        Err(error) => {
            tracing::warn!(grant = %grant.id, provider = %grant.provider, error = %crate::error_chain::Chain(&error), "no new token after the provider's 401; passed through");
            AfterRejection::PassThrough
        }
    }
}

/// A server other than the provider's own API — an MCP server behind the broker (gateway
/// mode) — refused `rejected` with 401: the token to retry with once (rule 4 above, the same
/// one-at-a-time refresh), or `None` when there is none to be had.
pub async fn retry_token_after_401(
    core: &Core,
    provider: &ProviderConfig,
    rejected: &AccessToken,
) -> Option<AccessToken> {
    match token_after_rejection(core, provider, rejected).await {
        AfterRejection::Retry(token) => Some(*token),
        // The grant is already marked when the refresh ended in `invalid_grant`.
        AfterRejection::PassThrough | AfterRejection::NeedsReconsent => None,
    }
}

/// The same server refused the token the broker just renewed (or could not renew): the grant
/// needs a new consent, which the user's next call is sent to. False if the grant changed
/// meanwhile (someone connected again), which is left alone.
pub async fn refused_again(
    core: &Core,
    rejected: &AccessToken,
    server: &str,
) -> Result<bool, super::tokens::TokenError> {
    let why = format!("refused by server {server} behind the broker after a refresh");
    let kind = crate::store::grants::RefreshFailure::Refused;
    super::sealed_grant::mark_needs_reconsent(core, &rejected.grant, kind, &why).await
}
