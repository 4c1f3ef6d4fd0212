//! A call to a provider's API as the user: the one place the broker makes it, for every face —
//! `provider_request` over MCP, `/v1/proxy` for services, and whatever comes after them. The
//! face first gets the token through [`super::access`] (the client's consent, a refresh when
//! due), then hands it here with the request and translates the outcome; nothing here knows
//! rmcp or axum.
//!
//! The rules, in order:
//! 1. **Checked before any token** ([`ProviderRequest::new`], in `request.rs`): one of six
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
//!    refresh token, or a refresh held back (backoff, the attempt cap) or failing: the 401 is
//!    returned as it is. A second 401 too — no loop.
//! 5. **The answer** ([`ProviderAnswer`]): status, the headers worth showing, at most
//!    [`MAX_BODY_BYTES`] of body, with every token the call used replaced by `[redacted]`. A
//!    provider's 4xx or 5xx is an answer; [`CallError`] is for a call that got none.

mod request;
mod send;
#[cfg(test)]
mod tests;

use secrecy::SecretString;

pub use request::{ApiMethod, Body, ProviderRequest, Query, RequestError};
pub use send::{MAX_BODY_BYTES, ProviderAnswer, Unreachable};

use super::Core;
use super::refresh::{Want, refresh_grant};
use super::tokens::AccessToken;
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
}

/// Sends `request` as the user whose `token` the face obtained, retrying once after a 401.
pub async fn call(
    core: &Core,
    provider: &ProviderConfig,
    request: &ProviderRequest<'_>,
    token: AccessToken,
) -> Result<ProviderAnswer, CallError> {
    let answer = send_with(core, provider, request, &token, None).await?;
    if answer.status != 401 {
        return Ok(answer);
    }
    let Some(fresh) = token_after_rejection(core, provider, &token).await else { return Ok(answer) };
    // Built again for the new token: a refresh may have named another API base.
    send_with(core, provider, request, &fresh, Some(&token.token)).await
}

async fn send_with(
    core: &Core,
    provider: &ProviderConfig,
    request: &ProviderRequest<'_>,
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
    let stored = core.store.grant_account(&token.grant.id).await?;
    Ok(stored.and_then(|(_, base)| base).and_then(|base| url::Url::parse(&base).ok()))
}

/// A new token to retry with after the provider refused `rejected` with 401, or `None`: the
/// 401 is the answer.
async fn token_after_rejection(core: &Core, provider: &ProviderConfig, rejected: &AccessToken) -> Option<AccessToken> {
    let grant = &rejected.grant;
    if grant.refresh_token_sealed.is_none() {
        tracing::info!(grant = %grant.id, provider = %grant.provider, "the provider refused a token that cannot be refreshed; 401 passed through");
        return None;
    }
    match refresh_grant(core, provider, &grant.id, Want::Rejected(&rejected.token)).await {
        Ok(token) => {
            tracing::info!(grant = %grant.id, provider = %grant.provider, "the provider refused a token; retrying once with a refreshed one");
            Some(token)
        }
        Err(error) => {
            tracing::warn!(grant = %grant.id, provider = %grant.provider, error = %crate::error_chain::Chain(&error), "no new token after the provider's 401; passed through");
            None
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
    token_after_rejection(core, provider, rejected).await
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
    super::sealed_grant::mark_needs_reconsent(core, &rejected.grant, &why).await
}
