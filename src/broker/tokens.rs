//! Grants: storing a provider's tokens (sealed) and handing out a usable access token.
//!
//! An expired access token is refreshed before use ([`super::refresh`]: one refresh per grant
//! at a time on one instance or many, and a rotated refresh token is never lost). Losers wait
//! and re-read the row instead of redeeming the same (single-use, rotating) refresh token a
//! second time — the failure that logged users out in oauth2-proxy and Nango. `invalid_grant`
//! is terminal (the grant is marked for re-consent); an unavailable provider is transient (the
//! token is kept).

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use super::connection_events::{self, RevokedBy};
use super::core::Core;
use crate::config::ProviderConfig;
use crate::domain::{OrganizationId, Scopes};
use crate::providers::client::{self, AccountRef, TokenSet};
use crate::providers::token_response;
use crate::store::grants::{GrantRow, GrantStatus, SealedTokens};
use crate::store::grants::{Grants, NewGrant};

/// What [`store_grant`] wrote: the grant's id and the scopes it now carries.
#[derive(Debug, Clone)]
pub struct StoredGrant {
    pub grant_id: String,
    pub scopes: Scopes,
}

pub use super::refresh_locks::RefreshLocks;
pub use super::sealed_grant::{AccessToken, TokenError};
use super::sealed_grant::{access_ctx, expiry, open_access, owner, refresh_ctx};

/// Where a grant's tokens came from: the organization it was made in and the app that issued
/// them (`app_id` `None`: the operator's).
#[derive(Debug, Clone, Copy)]
pub struct MadeIn<'a> {
    pub organization: &'a OrganizationId,
    pub app_id: Option<&'a str>,
}

/// Seals freshly issued tokens into the user's grant for this provider and account (insert or
/// replace). The account is the provider's name for it (its userinfo), so connecting the same
/// account again updates it and a different one adds a grant. Returns the grant and its scopes.
/// `provider` is the app's settings the tokens were issued with (its userinfo is asked).
pub async fn store_grant(
    core: &Core,
    user_id: &str,
    provider: &ProviderConfig,
    tokens: TokenSet,
    requested: &Scopes,
    made_in: MadeIn<'_>,
) -> Result<StoredGrant, TokenError> {
    let provider_id = provider.id.as_str();
    let owner = owner(user_id, provider_id);
    let scopes = crate::providers::scopes::granted(provider, tokens.scopes.clone(), requested);
    // Before sealing: the account decides the row, and the row id is bound into the seal.
    let account = match tokens.account.clone() {
        Some(account) => Some(account),
        None => fetch_account(core, provider, &tokens.access_token).await?,
    };
    let account_id = account.as_ref().map_or("", |a| a.id.as_str());
    let account_label = account.as_ref().and_then(|a| a.label.clone().or_else(|| Some(a.id.clone())));
    let account = account_label.as_deref().unwrap_or("");
    // The row's id must be the one sealed for. The same account (by the provider's stable id)
    // keeps its row even if its name changed — the label follows; else an existing account
    // keeps its id (rows from before several accounts were allowed have ids of the older
    // derivation); a new one gets the derived id. If the row changes identity between the
    // look-up and the write (disconnected and connected again), the write does nothing and we
    // seal again for the new row.
    for _ in 0..3 {
        let now = core.now();
        let same_account = match account_id {
            "" => None,
            id => core.store.grants().for_account_id(user_id, provider_id, id).await?,
        };
        // The row as it was, for the event services with a webhook hear of.
        let before = match same_account {
            Some(existing) => {
                if existing.account_label.as_deref() != account_label.as_deref() {
                    core.store.grants().relabel(&existing.id, account_label.as_deref()).await?;
                }
                Some(existing)
            }
            None => core.store.grants().for_account(user_id, provider_id, account, None).await?,
        };
        let grant_id = match &before {
            Some(existing) => existing.id.clone(),
            None => Grants::id_for(user_id, provider_id, if account_id.is_empty() { account } else { account_id }),
        };
        let sealed = SealedTokens {
            access_token_sealed: core
                .sealer
                .seal(tokens.access_token.expose_secret().as_bytes(), access_ctx(&grant_id, &owner)),
            refresh_token_sealed: tokens
                .refresh_token
                .as_ref()
                .map(|t| core.sealer.seal(t.expose_secret().as_bytes(), refresh_ctx(&grant_id, &owner))),
            key_id: core.sealer.active_key_id(),
            expires_at: expiry(now, tokens.expires_in),
            scopes: scopes.clone(),
        };
        let event = connection_events::stored(
            before.as_ref(),
            &grant_id,
            user_id,
            provider_id,
            account_label.as_deref(),
            &scopes,
        );
        if !core
            .store
            .grants()
            .upsert(
                &NewGrant {
                    id: &grant_id,
                    user_id,
                    provider: provider_id,
                    account_label: account_label.as_deref(),
                    tokens: &sealed,
                    organization: made_in.organization,
                    app_id: made_in.app_id,
                },
                now,
            )
            .noting(event.as_ref(), now)
            .await?
        {
            continue;
        }
        let api_base = tokens.api_base_url.as_ref().map(url::Url::as_str);
        core.store.grants().set_account(&grant_id, account_id, api_base).await?;
        let detail = match &account_label {
            Some(label) => format!("account={label} scopes={}", scopes.to_space_separated()),
            None => format!("scopes={}", scopes.to_space_separated()),
        };
        core.store.audit().record_implied(now, Some(user_id), "grant.stored", Some(provider_id), Some(&detail)).await?;
        core.events.connections_changed(user_id, provider_id);
        return Ok(StoredGrant { grant_id, scopes });
    }
    Err(TokenError::KeptChanging)
}

/// A valid access token for one of the user's accounts at `provider` (`account` as the tools
/// name it, '' for an account without a name; `None` for the most recently updated one),
/// carrying at least `required` scopes.
///
/// Crate-private on purpose: it knows nothing of which client asks. Tools and extensions get
/// tokens through [`crate::mcp::extension::ExtensionContext::access_token`] and the handler's
/// `token_for_tool`, which check the client's consent first.
pub(crate) async fn access_token_for(
    core: &Core,
    user_id: &str,
    provider: &ProviderConfig,
    account: Option<&str>,
    required: &Scopes,
    within: Option<&OrganizationId>,
) -> Result<AccessToken, TokenError> {
    let provider_id = provider.id.as_str();
    let grant = match account {
        Some(account) => core.store.grants().for_account(user_id, provider_id, account, within).await?,
        None => core.store.grants().latest(user_id, provider_id, within).await?,
    };
    let grant = grant.ok_or(TokenError::NotConnected)?;
    access_token_from(core, provider, grant, required).await
}

/// [`access_token_for`] from a grant row the caller has just read (saves reading it again).
pub(crate) async fn access_token_from(
    core: &Core,
    provider: &ProviderConfig,
    grant: GrantRow,
    required: &Scopes,
) -> Result<AccessToken, TokenError> {
    check_usable(&grant, required)?;
    if super::refresh_margin::is_fresh(&grant, core.now(), super::refresh_margin::max_margin(core, provider)) {
        return open_access(core, grant).await;
    }
    super::refresh::refresh_grant(core, provider, &grant.id, super::refresh::Want::Due).await
}

fn check_usable(grant: &GrantRow, required: &Scopes) -> Result<(), TokenError> {
    if grant.status != GrantStatus::Active {
        return Err(TokenError::NeedsReconsent);
    }
    if !grant.scopes.is_superset_of(required) {
        let missing = required.difference(&grant.scopes);
        return Err(TokenError::MissingScopes { granted: grant.scopes.clone(), missing });
    }
    Ok(())
}

/// Revokes every account the user holds at `provider` and deletes them. True if there was one.
pub async fn disconnect(core: &Core, user_id: &str, provider: &ProviderConfig) -> Result<bool, TokenError> {
    let mut any = false;
    for grant in core.store.grants().at(user_id, provider.id.as_str()).await? {
        any |= disconnect_grant(core, provider, &grant).await?.deleted;
    }
    Ok(any)
}

/// What disconnecting told the provider, so no face claims a revocation that did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revocation {
    /// The provider accepted the revocation (RFC 7009).
    Revoked,
    /// The provider offers no revocation endpoint: its tokens lapse on their own.
    NotOffered,
    /// The provider did not accept it (or could not be reached).
    Failed,
    /// The stored token could not be opened, so there was nothing to send.
    TokenUnreadable,
}

impl Revocation {
    /// A stable code, for links and the audit log.
    pub fn code(self) -> &'static str {
        match self {
            Revocation::Revoked => "revoked",
            Revocation::NotOffered => "not_offered",
            Revocation::Failed => "failed",
            Revocation::TokenUnreadable => "token_unreadable",
        }
    }

    /// The outcome a [`Revocation::code`] names.
    pub fn from_code(code: &str) -> Option<Self> {
        [Revocation::Revoked, Revocation::NotOffered, Revocation::Failed, Revocation::TokenUnreadable]
            .into_iter()
            .find(|r| r.code() == code)
    }
}

/// The outcome of [`disconnect_grant`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disconnected {
    /// The grant was there and is now deleted.
    pub deleted: bool,
    pub revocation: Revocation,
}

/// Revokes one grant at the provider (best effort) and deletes it, at the user's request.
pub async fn disconnect_grant(
    core: &Core,
    provider: &ProviderConfig,
    grant: &GrantRow,
) -> Result<Disconnected, TokenError> {
    disconnect_grant_by(core, provider, grant, RevokedBy::User).await
}

/// [`disconnect_grant`], saying who asked (services with a webhook hear it).
pub async fn disconnect_grant_by(
    core: &Core,
    provider: &ProviderConfig,
    grant: &GrantRow,
    by: RevokedBy,
) -> Result<Disconnected, TokenError> {
    let provider_id = provider.id.as_str();
    let owner = owner(&grant.user_id, provider_id);
    // Revoked with the app that issued the tokens; an app that cannot be built still lets the
    // grant be deleted (the provider is then not told, and the audit entry says so).
    let app = match super::provider_apps::for_grant(core, grant, provider).await {
        Ok(app) => app,
        Err(super::provider_apps::AppError::Store(e)) => return Err(TokenError::Store(e)),
        Err(error) => {
            tracing::warn!(grant = %grant.id, %error, "the organization's app could not be built to revoke with");
            None
        }
    };
    let provider = app.as_deref().unwrap_or(provider);
    // Revoke the refresh token (which revokes its access tokens at RFC 7009 providers), else
    // the access token.
    let (sealed, ctx, is_refresh) = match &grant.refresh_token_sealed {
        Some(r) => (r.as_slice(), refresh_ctx(&grant.id, &owner), true),
        None => (grant.access_token_sealed.as_slice(), access_ctx(&grant.id, &owner), false),
    };
    // The audit entry says what the provider was told and, when it failed, why (the provider's
    // error or the transport's, never a token).
    let (revocation, outcome) = match core.sealer.open(sealed, ctx).ok().and_then(|p| String::from_utf8(p).ok()) {
        Some(_) if provider.revocation_url.is_none() => (Revocation::NotOffered, "not_offered".to_owned()),
        Some(token) => match crate::telemetry::provider_call(
            provider_id,
            "revoke",
            client::revoke(&core.http, provider, &SecretString::from(token), is_refresh),
        )
        .await
        {
            Ok(()) => (Revocation::Revoked, "revoked".to_owned()),
            Err(error) => {
                tracing::warn!(provider = provider_id, %error, "revocation at the provider failed; deleting the grant anyway");
                (Revocation::Failed, format!("failed ({error})"))
            }
        },
        None => {
            tracing::warn!(grant = %grant.id, "could not open token to revoke it");
            (Revocation::TokenUnreadable, "token_unreadable".to_owned())
        }
    };
    let revoked = connection_events::revoked(grant, by);
    let deleted = core.store.grants().delete(&grant.id).noting(Some(&revoked), core.now()).await?;
    // The audit entry says what the provider answered, with its outcome.
    let detail = match &grant.account_label {
        Some(label) => format!("account={label} revocation={outcome}"),
        None => format!("revocation={outcome}"),
    };
    let audit_outcome = if revocation == Revocation::Failed {
        crate::store::audit::Outcome::Failure
    } else {
        crate::store::audit::Outcome::Success
    };
    let event = crate::store::audit::AuditEvent::new(
        crate::store::audit::implied_actor("grant.disconnected", Some(&grant.user_id), None),
        "grant.disconnected",
        Some(&grant.user_id),
    );
    core.store
        .audit()
        .record(core.now(), event.provider(Some(provider_id)).detail(Some(&detail)).outcome(audit_outcome))
        .await?;
    core.events.connections_changed(&grant.user_id, provider_id);
    Ok(Disconnected { deleted, revocation })
}

/// The account the tokens are for, from the provider's userinfo endpoint: its stable id and
/// label where the provider's entry says where they are (`account_id_field`,
/// `account_label_field`), else a label found under a usual name. `None` for a provider with no
/// identity endpoint (one account per user); an endpoint that fails is an error, never an empty
/// account.
async fn fetch_account(
    core: &Core,
    provider: &ProviderConfig,
    access_token: &SecretString,
) -> Result<Option<AccountRef>, TokenError> {
    let Some(url) = provider.userinfo_url.clone() else { return Ok(None) };
    let failed = |why: &str| {
        tracing::warn!(provider = %provider.id, why, "identity lookup failed");
        TokenError::IdentityFailed(why.to_owned())
    };
    let mut request = core.http.get(url).bearer_auth(access_token.expose_secret()).timeout(Duration::from_secs(5));
    if let Some(agent) = &provider.user_agent {
        request = request.header(reqwest::header::USER_AGENT, agent);
    }
    let response = request.send().await.map_err(|_| failed("the identity endpoint did not answer"))?;
    let status = response.status();
    if !status.is_success() {
        return Err(failed(&format!("the identity endpoint answered {}", status.as_u16())));
    }
    let body: serde_json::Value = response.json().await.map_err(|_| failed("the identity answer is not JSON"))?;
    let body = body.as_object().ok_or_else(|| failed("the identity answer is not an object"))?;
    let field = |path: &str| token_response::lookup(body, path).and_then(token_response::scalar);
    match &provider.account_id_field {
        Some(id_field) => {
            let id = field(id_field).ok_or_else(|| failed("the identity answer names no account id"))?;
            let label = provider.account_label_field.as_deref().and_then(field);
            Ok(Some(AccountRef { id, label }))
        }
        // A provider described without account fields: a label under a usual name, no stable id.
        None => {
            let label = ["account", "login", "preferred_username", "email", "name", "username", "sub"]
                .iter()
                .find_map(|k| body.get(*k).and_then(|v| v.as_str()).map(|s| s.chars().take(128).collect::<String>()));
            Ok(label.map(|label| AccountRef { id: String::new(), label: Some(label) }))
        }
    }
}
