//! The one decision every face asks: may this client have this user's token for this provider
//! and these scopes — and if not, what must the user do?
//!
//! [`standing`] reads where the client stands without creating anything (a face that asks the
//! user a question first, like `connect_account`, starts from it); [`access`] also opens the
//! authorization the user must finish, so the answer carries the link. The consent check runs
//! on the stored grant before its token is touched: a client the user has not allowed must not
//! even make the broker refresh it (MCP security best practices §Confused deputy).
//!
//! Faces translate [`Access`]: MCP to a token, `-32042` / URL elicitation / `isError` text; the
//! token API to JSON; nothing here knows either.

use std::time::Duration;

use super::core::Core;
use crate::broker::authorizations::{self, Ask, Requester};
use crate::broker::consent;
use crate::broker::tokens::{self, AccessToken, TokenError};
use crate::config::ProviderConfig;
use crate::domain::{OrganizationId, Scopes};
use crate::identity::ClientIdentity;
use crate::store::StoreError;
use crate::store::authorizations::AuthorizationRow;
use crate::store::grants::{GrantRow, GrantStatus};

/// How long a caller should wait before asking again after the provider did not answer.
pub const RETRY_AFTER_UNAVAILABLE: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Handing out the token failed in a way no answer to the user covers (see [`standing`]).
    #[error("the token could not be handed out")]
    Token(#[source] TokenError),
}

/// Why the user must connect (again) through the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectReason {
    /// No account at this provider (or not the one named).
    NotConnected,
    /// The provider no longer accepts the stored grant (`invalid_grant`, or expired with no
    /// refresh token).
    NeedsReconsent,
}

impl ConnectReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectReason::NotConnected => "not_connected",
            ConnectReason::NeedsReconsent => "needs_reconsent",
        }
    }
}

/// Where this client stands with (user, provider, account) and the scopes it needs.
pub enum Standing {
    /// Connected with those scopes, and this client may use it: the token.
    Ready(Box<AccessToken>),
    /// Not connected there, or the provider refused the refresh: the user must connect.
    NotConnected(ConnectReason),
    /// Connected without all the scopes: reconnect asking for `ask` (held plus missing, so the
    /// new grant replaces the old without losing scopes).
    MoreScopes { ask: Scopes, missing: Scopes },
    /// Connected, but this client may not use the grant yet (or not with all the scopes it now
    /// carries): the user must allow it.
    AllowClient(Box<GrantRow>),
    /// The provider did not answer (a refresh failed transiently, or is held back by its
    /// backoff or the attempt cap); try again after `retry_after`.
    Unavailable { retry_after: Duration },
    /// The provider refused the refresh for a reason the user cannot fix by connecting.
    Refused(String),
}

/// [`Standing`] with the authorization opened where the user must act.
pub enum Access {
    Ready(Box<AccessToken>),
    /// The user must connect (or reconnect) the account: the link is the authorization's.
    Connect {
        authorization: AuthorizationRow,
        reason: ConnectReason,
    },
    /// The user must reconnect granting `missing` as well.
    MoreScopes {
        authorization: AuthorizationRow,
        missing: Scopes,
    },
    /// The user must let this client use an existing connection (no trip to the provider).
    AllowClient {
        authorization: AuthorizationRow,
    },
    Unavailable {
        retry_after: Duration,
    },
    Refused(String),
}

/// The consent check on the stored grant.
enum Gate {
    /// This client may use the grant as read.
    Allowed(Box<GrantRow>),
    /// The grant is usable but this client may not use it yet.
    Missing(Box<GrantRow>),
    /// No usable grant: the connect flow decides (and records the consent).
    Unsettled,
}

/// Where `client` stands with the user's account at `provider` (`account` as the tools name it,
/// '' for an account without a name; `None` for the most recently updated one) and `required`.
///
/// `within` an organization (a service's), grants made in another one are not there.
pub async fn standing(
    core: &Core,
    user_id: &str,
    client: &ClientIdentity,
    provider: &ProviderConfig,
    account: Option<&str>,
    required: &Scopes,
    within: Option<&OrganizationId>,
) -> Result<Standing, AccessError> {
    let (token, read) = match consent_gate(core, user_id, client, provider, account, required, within).await? {
        Gate::Missing(grant) => return Ok(Standing::AllowClient(grant)),
        Gate::Allowed(grant) => {
            let read = (grant.id.clone(), grant.scopes.clone());
            (tokens::access_token_from(core, provider, *grant, required).await, Some(read))
        }
        Gate::Unsettled => (tokens::access_token_for(core, user_id, provider, account, required, within).await, None),
    };
    match token {
        // The consent covered exactly this grant as it was read: nothing to check again.
        Ok(token)
            if read.as_ref().is_some_and(|(id, scopes)| *id == token.grant.id && *scopes == token.grant.scopes) =>
        {
            Ok(Standing::Ready(Box::new(token)))
        }
        // Otherwise (a refresh changed the scopes, or the grant appeared meanwhile) re-check.
        Ok(token) => {
            if consent::client_may_use(core, client, &token.grant).await? {
                Ok(Standing::Ready(Box::new(token)))
            } else {
                Ok(Standing::AllowClient(Box::new(token.grant)))
            }
        }
        Err(TokenError::NotConnected) => Ok(Standing::NotConnected(ConnectReason::NotConnected)),
        Err(TokenError::NeedsReconsent) => Ok(Standing::NotConnected(ConnectReason::NeedsReconsent)),
        Err(TokenError::MissingScopes { granted, missing }) => {
            Ok(Standing::MoreScopes { ask: granted.union(required), missing })
        }
        Err(TokenError::ProviderUnavailable { retry_after }) => Ok(Standing::Unavailable { retry_after }),
        Err(TokenError::ProviderRefused(why)) => Ok(Standing::Refused(why)),
        Err(TokenError::Store(e)) => Err(AccessError::Store(e)),
        // Only storing a new grant looks the account up (or can see its row keep changing); a
        // token read never gets here. A refresh task that failed is a bug.
        Err(error @ (TokenError::IdentityFailed(_) | TokenError::KeptChanging | TokenError::RefreshTask(_))) => {
            Err(AccessError::Token(error))
        }
    }
}

/// A token the requester's client may use, or the authorization the user must finish first
/// (reused while one asking the same is open), or why not now.
pub async fn access(
    core: &Core,
    who: &Requester<'_>,
    provider: &ProviderConfig,
    account: Option<&str>,
    required: &Scopes,
) -> Result<Access, AccessError> {
    Ok(match standing(core, who.user_id, who.client, provider, account, required, who.organization).await? {
        Standing::Ready(token) => Access::Ready(token),
        Standing::Unavailable { retry_after } => Access::Unavailable { retry_after },
        Standing::Refused(why) => Access::Refused(why),
        Standing::NotConnected(reason) => {
            // The provider's defaults only when nothing was named; `open` adds what the
            // provider needs to work.
            let scopes = if required.is_empty() { provider.default_scopes.clone() } else { required.clone() };
            let authorization = authorizations::open(core, who, provider, &scopes, Ask::Connect).await?;
            Access::Connect { authorization, reason }
        }
        Standing::MoreScopes { ask, missing } => {
            let authorization = authorizations::open(core, who, provider, &ask, Ask::Connect).await?;
            Access::MoreScopes { authorization, missing }
        }
        Standing::AllowClient(grant) => {
            let authorization = authorizations::open(core, who, provider, &grant.scopes, Ask::UseGrant(&grant)).await?;
            Access::AllowClient { authorization }
        }
    })
}

/// Whether this client may use the stored grant, checked before the token is touched.
async fn consent_gate(
    core: &Core,
    user_id: &str,
    client: &ClientIdentity,
    provider: &ProviderConfig,
    account: Option<&str>,
    required: &Scopes,
    within: Option<&OrganizationId>,
) -> Result<Gate, AccessError> {
    // The grant and this client's consent in one read (one query per decision).
    let read = core.store.grants().with_consent(user_id, provider.id.as_str(), account, &client.key(), within).await?;
    let Some(read) = read else { return Ok(Gate::Unsettled) };
    let allowed = read.allowed();
    let grant = read.grant;
    // A grant that must be reconnected anyway (revoked, or lacking scopes) goes through the
    // provider flow, which records this client's consent on the way.
    if grant.status != GrantStatus::Active || !grant.scopes.is_superset_of(required) {
        return Ok(Gate::Unsettled);
    }
    if allowed {
        return Ok(Gate::Allowed(Box::new(grant)));
    }
    Ok(Gate::Missing(Box::new(grant)))
}
