//! The limits a registered service's authentication enforces, counted in the database so they
//! hold across every instance on it (the token API's cap on open waits is the token API's own,
//! `crate::api::wait_slots`):
//!
//! - a **request budget** per service: `requests_per_minute` authenticated requests, at most a
//!   minute's worth at once, held by GCRA on one row per service with shares leased by each
//!   instance ([`crate::store::token_api`]): constant time per request, most requests
//!   touching no row;
//! - **failed authentication by address**: wrong or unknown service credentials count against
//!   the client address ([`crate::net::client_address`]); after [`AUTH_FAILURES`] in
//!   [`AUTH_WINDOW_SECONDS`] the address is locked for as long, correct credentials included,
//!   so service secrets cannot be guessed at request speed.
//!
//! Over a limit the answer is [`ServiceAuthRefusal::Limited`] (429 `rate_limited` with
//! `Retry-After` at the token API and the token exchange), audited as `token_api.limited` and
//! counted in the token-API answer metric.

use super::context::IdentityContext;
use super::service_auth_refusal::{Limit, ServiceAuthRefusal};
use crate::store::StoreError;
use crate::store::audit::{Actor, AuditEvent, Outcome};
use crate::store::throttle::ThrottleLock;
use crate::store::token_api::Budget;
use crate::store::token_api::ServiceRow;

/// Failed authentications an address may make in [`AUTH_WINDOW_SECONDS`] before it is locked.
pub const AUTH_FAILURES: i64 = 20;
/// The failed-authentication window, and how long a lock lasts. Equal to the longest window
/// the throttle sweep keeps (`store::throttle::LONGEST_WINDOW_SECONDS`).
pub const AUTH_WINDOW_SECONDS: i64 = crate::store::throttle::LONGEST_WINDOW_SECONDS;

/// Takes one request from the service's budget, or refuses with when to retry.
pub async fn take_request(identity: &IdentityContext, service: &ServiceRow) -> Result<(), ServiceAuthRefusal> {
    let per_minute = identity.config.token_api.of(&service.id).requests_per_minute;
    match identity.store.request_budgets().take(&service.id, identity.now(), per_minute).await? {
        Budget::Taken => Ok(()),
        Budget::Refused { retry_after } => {
            refused(identity, Actor::Service(&service.id), Limit::Requests).await;
            Err(ServiceAuthRefusal::Limited { retry_after, limit: Limit::Requests })
        }
    }
}

/// Refuses an address locked for failed authentications (before its credentials are checked).
/// An address found not locked is not asked about again for
/// [`crate::store::token_api::UNLOCKED_FRESH`]: a lock set on another instance is seen that
/// much later; one set here at once (a counted failure forgets the address).
pub async fn check_address(identity: &IdentityContext, address: &str) -> Result<(), ServiceAuthRefusal> {
    let bucket = auth_bucket(address);
    if identity.store.api_limits().recently_unlocked(&bucket) {
        return Ok(());
    }
    let now = identity.now();
    match identity.store.throttle().lock(&bucket).await? {
        Some(lock) if lock.locked_until > now => {
            refused(identity, Actor::Visitor, Limit::FailedAuthentication).await;
            let retry_after = (lock.locked_until - now) as u64;
            Err(ServiceAuthRefusal::Limited { retry_after, limit: Limit::FailedAuthentication })
        }
        _ => {
            identity.store.api_limits().found_unlocked(&bucket);
            Ok(())
        }
    }
}

/// Counts a failed authentication from `address`; the one that reaches [`AUTH_FAILURES`]
/// locks the address for [`AUTH_WINDOW_SECONDS`].
pub async fn count_failed_authentication(identity: &IdentityContext, address: &str) -> Result<(), StoreError> {
    let now = identity.now();
    let bucket = auth_bucket(address);
    identity.store.api_limits().forget_unlocked(&bucket);
    let failures = identity.store.throttle().count_failure(&bucket, now, now - AUTH_WINDOW_SECONDS).await?;
    if failures >= AUTH_FAILURES {
        tracing::warn!(%address, "token API: too many failed service authentications; address locked");
        identity
            .store
            .throttle()
            .set_lock(&bucket, ThrottleLock { locked_until: now + AUTH_WINDOW_SECONDS, strikes: 1 })
            .await?;
        // A request that found the address unlocked meanwhile must not keep that answer.
        identity.store.api_limits().forget_unlocked(&bucket);
    }
    Ok(())
}

fn auth_bucket(address: &str) -> String {
    format!("api-auth\n{address}")
}

/// Audits and counts a refusal; an audit that cannot be written is logged, the refusal stands.
pub async fn refused(identity: &IdentityContext, actor: Actor<'_>, limit: Limit) {
    let detail = format!("limit={}", limit.as_str());
    let event = AuditEvent::new(actor, "token_api.limited", None).detail(Some(&detail)).outcome(Outcome::Refused);
    if let Err(error) = identity.store.audit().record(identity.now(), event).await {
        tracing::warn!(%error, "token API: could not audit a rate-limited request");
    }
    crate::telemetry::token_api_answer("rate_limited");
}
