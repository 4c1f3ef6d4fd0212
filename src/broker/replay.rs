//! A provider's API answered 401 to an access token we believed valid (revoked server-side,
//! rotated by another client, expired early): one forced refresh, so the face can send the
//! request once more with the new token.
//!
//! The refresh goes through the same one-at-a-time machinery as any other
//! ([`super::refresh`]): when several callers get the 401 together, the first refreshes and the
//! others find a stored token that differs from the one refused and use it, with no second
//! refresh. A grant without a refresh token, a refresh held back (backoff, the attempt cap) or
//! failing: no new token, and the face passes the provider's 401 through as it is. Only one
//! retry: a second 401 is the caller's to read. Faces replay only requests whose body they
//! hold in full (both `provider_request` and `/v1/proxy` buffer it).

use super::refresh::{Want, refresh_grant};
use super::tokens::AccessToken;
use crate::config::ProviderConfig;
use crate::state::Core;

/// A new token to retry with after the provider refused `rejected` with 401, or `None`: pass
/// the 401 through.
pub async fn token_after_rejection(
    core: &Core,
    provider: &ProviderConfig,
    rejected: &AccessToken,
) -> Option<AccessToken> {
    let grant = &rejected.grant;
    if grant.refresh_token_sealed.is_none() {
        tracing::info!(grant = %grant.id, provider = %grant.provider, "the provider refused a token it cannot be refreshed; 401 passed through");
        return None;
    }
    match refresh_grant(core, provider, &grant.id, Want::Rejected(&rejected.token)).await {
        Ok(token) => {
            tracing::info!(grant = %grant.id, provider = %grant.provider, "the provider refused a token; retrying once with a refreshed one");
            Some(token)
        }
        Err(error) => {
            tracing::warn!(grant = %grant.id, provider = %grant.provider, %error, "no new token after the provider's 401; passed through");
            None
        }
    }
}
