//! Refreshing a grant's tokens so that a token the provider issued is never lost.
//!
//! Providers that rotate refresh tokens (RFC 9700 §4.14.2) invalidate the old one the moment
//! they answer: from then on the answer is the only copy of the user's connection. So:
//! - **One refresh per grant at a time**: an in-process mutex serialises callers here; a lease
//!   on the row (compare-and-swap, naming this process as holder) serialises instances. Losers
//!   poll the row every [`POLL`] and reuse the token the winner stores instead of redeeming the
//!   same refresh token again (which a rotating provider answers with `invalid_grant`).
//! - **A lease is short and renewed**: the holder extends it every third of `refresh_lease`
//!   while it waits for the provider, so one left by a process that died lapses within
//!   `refresh_lease`, not after a fixed long guess; and a process takes back at once a lease
//!   its own interrupted refresh left (it knows none of its refreshes runs: it holds the mutex).
//! - **The refresh runs detached** from the request that started it (a spawned task): a client
//!   that disconnects, or a shutdown that ends requests, does not drop an answer in flight.
//!   Shutdown waits for running refreshes with [`RefreshLocks::wait_idle`].
//! - **The answer is made durable first**: the write is retried while the database is unavailable,
//!   for three `database_timeout`s; if it still fails, the sealed tokens stay in this process's
//!   memory and the next attempt stores them before it would call the provider again. The write is
//!   conditioned on the redeemed refresh token still being the stored one, not on the lease (see
//!   [`crate::store::grants::Grants::store_refreshed_tokens`]), so a lease that lapsed during an
//!   outage cannot make the rotated token lose against a stale one.
//!
//! - **A provider that fails is left alone for a while**: after a 429, 5xx,
//!   timeout or connection failure the grant is not refreshed again before its
//!   `refresh_not_before` ([`super::backoff`]), and no grant sends its provider more than
//!   `refresh_attempts_per_minute` refreshes — both in the row, checked by the same statement
//!   that claims the lease, so they hold across instances and restarts. Meanwhile a token that
//!   has not expired is still handed out; an expired one gets "unavailable, retry after N s".
//!
//! [`RefreshLocks::wait_idle`]: super::refresh_locks::RefreshLocks::wait_idle

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use tokio::time::Instant;

use super::core::Core;
use super::refresh_locks::PendingRotation;
use super::sealed_grant::{
    AccessToken, TokenError, access_ctx, broken, expiry, mark_needs_reconsent, open_access, owner, refresh_ctx,
};
use super::{backoff, connection_events, refresh_margin};
use crate::config::ProviderConfig;
use crate::providers::client::{self, ProviderError, TokenSet, TransientKind};
use crate::store::grants::Lease;
use crate::store::grants::{GrantRow, GrantStatus, RefreshFailure, SealedTokens};

/// How often a caller waiting for another holder's refresh re-reads the row.
const POLL: Duration = Duration::from_millis(100);
/// How long storing a provider's answer is retried while the database is unavailable: three
/// call bounds (15 s by default) — longer than a blip, short enough to answer the caller.
fn commit_budget(core: &Core) -> Duration {
    core.config.database_timeout * 3
}
/// The longest pause between two attempts to store it.
const COMMIT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Why a refresh is asked for.
#[derive(Clone, Copy)]
pub(super) enum Want<'a> {
    /// The stored token is due (within its refresh margin, or expired).
    Due,
    /// The provider answered 401 to this access token although we believed it valid: refresh
    /// once, unless the stored token is already another one (someone refreshed meanwhile).
    Rejected(&'a SecretString),
}

/// A valid access token for `grant`'s row after refreshing it (or reusing the token another
/// caller just stored). While the refresh is held back (backoff after a transient failure, or
/// the per-minute attempt cap) or fails transiently, a token that has not expired yet is
/// returned as it is; an expired one gives [`TokenError::ProviderUnavailable`] with when to
/// retry.
pub(super) async fn refresh_grant(
    core: &Core,
    provider: &ProviderConfig,
    grant_id: &str,
    want: Want<'_>,
) -> Result<AccessToken, TokenError> {
    let lock = core.refresh_locks.lock_for(grant_id);
    // A caller gives up waiting for someone else's refresh after this long (real time: the
    // lease's own expiry is judged by the clock in state) and may retry.
    let give_up = Instant::now() + core.config.refresh_lease * 2 + commit_budget(core);
    let margin = refresh_margin::max_margin(core, provider);
    let cap = i64::from(core.config.refresh_attempts_per_minute);
    // A token that still works may stand in for a refresh that cannot happen now; not one the
    // provider has just refused.
    let serve_valid = matches!(want, Want::Due);
    loop {
        let guard = lock.clone().lock_owned().await;
        store_pending(core, grant_id).await?;
        // Re-read under the lock: someone may have refreshed while we waited.
        let current = core.store.grants().by_id(grant_id).await?.ok_or(TokenError::NotConnected)?;
        if current.status != GrantStatus::Active {
            return Err(TokenError::NeedsReconsent);
        }
        let now = core.now();
        match want {
            Want::Due if refresh_margin::is_fresh(&current, now, margin) => return open_access(core, current).await,
            Want::Due => {}
            Want::Rejected(rejected) => {
                let stored = open_access(core, current.clone()).await?;
                if stored.token.expose_secret() != rejected.expose_secret() {
                    return Ok(stored);
                }
                if current.refresh_token_sealed.is_none() {
                    return Err(TokenError::ProviderRefused("the provider issued no refresh token".into()));
                }
            }
        }
        if let Some(wait) = current.refresh_gate.wait(now, cap) {
            if serve_valid && refresh_margin::still_valid(&current, now) {
                return open_access(core, current).await;
            }
            return Err(TokenError::ProviderUnavailable { retry_after: seconds(wait) });
        }
        let holder = core.refresh_locks.holder();
        if core
            .store
            .grants()
            .claim_lease(
                &Lease { grant_id: &current.id, version: current.version, holder },
                now,
                lease_until(core, now),
                cap,
            )
            .await?
        {
            // The claim moved the row to the next version; only we expect it.
            let leased = GrantRow { version: current.version + 1, ..current };
            let running = core.refresh_locks.start();
            let task_state = core.clone();
            let task_provider = provider.clone();
            let task = tokio::spawn(async move {
                let _guard = guard;
                let _running = running;
                run_refresh(&task_state, &task_provider, leased, serve_valid).await
            });
            match task.await {
                Ok(Ok(Some(token))) => return Ok(token),
                // The grant changed under the refresh (a new consent, another instance's
                // answer): read it again.
                Ok(Ok(None)) => {}
                Ok(Err(error)) => return Err(error),
                Err(join) => return Err(TokenError::RefreshTask(join)),
            }
        } else {
            drop(guard);
            // Another holder is refreshing (or the gate just closed): a token that still works
            // is used meanwhile; else wait for its answer, then re-read.
            if serve_valid && refresh_margin::still_valid(&current, now) {
                return open_access(core, current).await;
            }
            if Instant::now() > give_up {
                return Err(TokenError::ProviderUnavailable { retry_after: core.config.refresh_lease });
            }
            tokio::time::sleep(POLL).await;
        }
        if Instant::now() > give_up {
            return Err(TokenError::ProviderUnavailable { retry_after: core.config.refresh_lease });
        }
    }
}

fn seconds(wait: i64) -> Duration {
    Duration::from_secs(u64::try_from(wait.max(1)).unwrap_or(1))
}

fn lease_until(core: &Core, now: i64) -> i64 {
    now + i64::try_from(core.config.refresh_lease.as_secs()).unwrap_or(i64::MAX / 2).max(1)
}

/// Stores tokens an earlier refresh in this process brought but could not store. Until that
/// succeeds nothing may call the provider: the stored refresh token is already spent.
async fn store_pending(core: &Core, grant_id: &str) -> Result<(), TokenError> {
    let Some(pending) = core.refresh_locks.pending(grant_id) else { return Ok(()) };
    match core
        .store
        .grants()
        .store_refreshed_tokens(grant_id, &pending.redeemed, &pending.tokens, pending.issued_at)
        .await
    {
        Ok(stored) => {
            core.refresh_locks.forget_pending(grant_id);
            if let Some(row) = stored {
                tracing::info!(grant = %grant_id, "stored the rotated tokens a refresh had kept in memory");
                refreshed(core, &row).await;
            } else {
                tracing::warn!(grant = %grant_id, "the grant changed since the refresh; its kept tokens are dropped");
            }
            Ok(())
        }
        Err(error) => Err(error.into()),
    }
}

/// What a refresh holding the lease ends with: a token, or `None` when the grant changed under
/// it and the caller should read it again.
type Outcome = Result<Option<AccessToken>, TokenError>;

/// `serve_valid`: after a transient failure, a token that has not expired yet is returned.
async fn run_refresh(core: &Core, provider: &ProviderConfig, grant: GrantRow, serve_valid: bool) -> Outcome {
    let owner = owner(&grant.user_id, &grant.provider);
    let holder = core.refresh_locks.holder();
    let Some(redeemed) = grant.refresh_token_sealed.clone() else {
        // Expired and nothing to refresh with.
        mark_needs_reconsent(core, &grant, RefreshFailure::NoRefreshToken, "expired without a refresh token").await?;
        return Err(TokenError::NeedsReconsent);
    };
    let opened = core
        .sealer
        .open(&redeemed, refresh_ctx(&grant.id, &owner))
        .map_err(|e| e.to_string())
        .and_then(|plain| String::from_utf8(plain).map_err(|_| "the refresh token is not UTF-8".to_owned()));
    let refresh_token = match opened {
        Ok(token) => SecretString::from(token),
        Err(why) => return Err(broken(core, &grant, "refresh token", &why).await),
    };
    // Refreshed with the app that issued the tokens (the organization's own, or the operator's).
    let app = super::sealed_grant::app_or_reconnect(core, &grant, provider).await?;
    let provider = app.as_deref().unwrap_or(provider);
    let answer = with_renewed_lease(
        core,
        &grant,
        crate::telemetry::provider_call(
            provider.id.as_str(),
            "refresh",
            client::refresh(&core.http, provider, &core.config.redirect_uri(), &refresh_token),
        ),
    )
    .await;
    match answer {
        Ok(tokens) => commit(core, &grant, redeemed, &refresh_token, tokens).await,
        Err(ProviderError::InvalidGrant) => {
            // Version-checked: if someone stored newer tokens meanwhile, the grant stays active
            // and the caller reads them.
            let why = "provider answered invalid_grant to refresh";
            if mark_needs_reconsent(core, &grant, RefreshFailure::InvalidGrant, why).await? {
                Err(TokenError::NeedsReconsent)
            } else {
                Ok(None)
            }
        }
        Err(ProviderError::Unavailable(transient)) => {
            // Held back on every instance until the provider's Retry-After, else a backoff.
            let failures = grant.refresh_gate.failures.saturating_add(1);
            let wait = backoff::delay_seconds(failures, transient.retry_after, backoff::jitter());
            let now = core.now();
            tracing::warn!(grant = %grant.id, provider = %grant.provider, reason = %transient, failures, wait, "refresh failed transiently; backing off");
            let kind = failure_kind(transient.kind);
            let event = connection_events::refresh_failed(&grant, kind.as_str(), now + wait);
            core.store
                .grants()
                .record_refresh_failure(
                    &Lease { grant_id: &grant.id, version: grant.version, holder },
                    now + wait,
                    kind,
                )
                .noting(event.as_ref(), now)
                .await?;
            if serve_valid && refresh_margin::still_valid(&grant, now) {
                return open_access(core, grant).await.map(Some);
            }
            Err(TokenError::ProviderUnavailable { retry_after: seconds(wait) })
        }
        Err(other) => {
            tracing::warn!(grant = %grant.id, provider = %grant.provider, error = %other, "refresh refused");
            core.store
                .grants()
                .record_refresh_refusal(&Lease { grant_id: &grant.id, version: grant.version, holder })
                .await?;
            Err(TokenError::ProviderRefused(other.to_string()))
        }
    }
}

/// The stored kind of a transient failure (migration 0026).
fn failure_kind(kind: TransientKind) -> RefreshFailure {
    match kind {
        TransientKind::RateLimited => RefreshFailure::RateLimited,
        TransientKind::ServerError => RefreshFailure::ServerError,
        TransientKind::Timeout => RefreshFailure::Timeout,
        TransientKind::Unreachable => RefreshFailure::Unreachable,
    }
}

/// Runs `call` while renewing the lease every third of its length, so others see a live holder
/// for as long as the provider takes. A failed renewal is only logged: the provider's answer
/// must still be stored (its write does not depend on the lease).
async fn with_renewed_lease<T>(core: &Core, grant: &GrantRow, call: impl std::future::Future<Output = T>) -> T {
    let period = (core.config.refresh_lease / 3).max(Duration::from_millis(100));
    let renew = async {
        let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
        loop {
            ticks.tick().await;
            let now = core.now();
            let until = lease_until(core, now);
            match core
                .store
                .grants()
                .renew_lease(
                    &Lease { grant_id: &grant.id, version: grant.version, holder: core.refresh_locks.holder() },
                    until,
                )
                .await
            {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(grant = %grant.id, "the refresh lease was taken over while the provider answered")
                }
                Err(error) => tracing::warn!(grant = %grant.id, %error, "could not renew the refresh lease"),
            }
        }
    };
    tokio::select! {
        answer = call => answer,
        never = renew => never,
    }
}

/// Seals the provider's answer and stores it, retrying while the database is unavailable;
/// what cannot be stored is kept in memory for the next attempt.
async fn commit(
    core: &Core,
    grant: &GrantRow,
    redeemed: Vec<u8>,
    old_refresh: &SecretString,
    tokens: TokenSet,
) -> Outcome {
    let owner = owner(&grant.user_id, &grant.provider);
    let issued_at = core.now();
    // RFC 6749 §6: a new refresh token replaces the old; none means keep using the old.
    let refresh = tokens.refresh_token.as_ref().unwrap_or(old_refresh);
    let sealed = SealedTokens {
        access_token_sealed: core
            .sealer
            .seal(tokens.access_token.expose_secret().as_bytes(), access_ctx(&grant.id, &owner)),
        refresh_token_sealed: Some(
            core.sealer.seal(refresh.expose_secret().as_bytes(), refresh_ctx(&grant.id, &owner)),
        ),
        key_id: core.sealer.active_key_id(),
        expires_at: expiry(issued_at, tokens.expires_in),
        // Scopes the provider never echoes (providers::scopes::granted) stay with the grant.
        scopes: match core.providers.find(&grant.provider) {
            Some(provider) => crate::providers::scopes::granted(&provider, tokens.scopes.clone(), &grant.scopes),
            None => tokens.scopes.clone().unwrap_or_else(|| grant.scopes.clone()),
        },
    };
    let pending = PendingRotation { redeemed, tokens: sealed, issued_at };
    let started = Instant::now();
    let budget = commit_budget(core);
    let mut pause = Duration::from_millis(100);
    let event = connection_events::refreshed(grant, &pending.tokens.scopes);
    let stored = loop {
        match core
            .store
            .grants()
            .store_refreshed_tokens(&grant.id, &pending.redeemed, &pending.tokens, issued_at)
            .noting(event.as_ref(), issued_at)
            .await
        {
            Ok(stored) => break stored,
            Err(error) if error.is_unavailable() && started.elapsed() + pause < budget => {
                tracing::warn!(grant = %grant.id, %error, "storing refreshed tokens failed; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(COMMIT_BACKOFF_MAX);
            }
            Err(error) => {
                tracing::error!(grant = %grant.id, %error, "could not store refreshed tokens; keeping them in memory for the next attempt");
                core.refresh_locks.keep_pending(&grant.id, pending);
                return Err(TokenError::Store(error));
            }
        }
    };
    let Some(row) = stored else {
        tracing::warn!(grant = %grant.id, "the grant changed while refreshing; the new tokens are dropped");
        return Ok(None);
    };
    // A refresh answer naming the grant's API base (Salesforce instance_url, already checked
    // against `api_base_domains`) replaces the stored one. The tokens are durable already: a
    // failure here is logged and the old base kept until the next refresh.
    if let Some(base) = &tokens.api_base_url
        && let Err(error) = core.store.grants().set_api_base(&row.id, base.as_str()).await
    {
        tracing::warn!(grant = %row.id, %error, "could not store the API base a refresh named");
    }
    refreshed(core, &row).await;
    Ok(Some(AccessToken { token: tokens.access_token, grant: row }))
}

/// Audits a stored refresh and tells the faces. The tokens are already durable, so a failure
/// here is logged, not returned: the caller gets its token.
async fn refreshed(core: &Core, row: &GrantRow) {
    if let Err(error) = core
        .store
        .audit()
        .record_implied(core.now(), Some(&row.user_id), "grant.refreshed", Some(&row.provider), None)
        .await
    {
        tracing::warn!(grant = %row.id, %error, "the refresh is stored but its audit entry could not be written");
    }
    core.events.connections_changed(&row.user_id, &row.provider);
}
