//! Limits of the token API, counted in the database so they hold across every instance on it:
//!
//! - a **request budget** per service: `requests_per_minute` authenticated requests, at most a
//!   minute's worth at once, held by GCRA on one row per service with shares leased by each
//!   instance ([`crate::store::token_api`]): constant time per request, most requests
//!   touching no row;
//! - a **cap on open waits** per service: long polls (`?wait=N`) and event streams each hold a
//!   slot, a leased row renewed while open and deleted when it ends, so the slot of an instance
//!   that died lapses after `wait_lease` ([`WaitSlot`]);
//! - **failed authentication by address**: wrong or unknown service credentials count against
//!   the client address ([`crate::net::client_address`]); after [`AUTH_FAILURES`] in
//!   [`AUTH_WINDOW_SECONDS`] the address is locked for as long, correct credentials included,
//!   so service secrets cannot be guessed at request speed.
//!
//! Over a limit the answer is 429 `rate_limited` with `Retry-After` ([`Problem::rate_limited`]),
//! audited as `token_api.limited` and counted in the token-API answer metric.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::problem::Problem;
use crate::clock::SharedClock;
use crate::state::AppState;
use crate::store::Store;
use crate::store::audit::{Actor, AuditEvent, Outcome};
use crate::store::throttle::ThrottleLock;
use crate::store::token_api::Budget;
use crate::store::token_api::ServiceRow;

/// Failed authentications an address may make in [`AUTH_WINDOW_SECONDS`] before it is locked.
pub const AUTH_FAILURES: i64 = 20;
/// The failed-authentication window, and how long a lock lasts. Equal to the longest window
/// the throttle sweep keeps (`store::throttle::LONGEST_WINDOW_SECONDS`).
pub const AUTH_WINDOW_SECONDS: i64 = crate::store::throttle::LONGEST_WINDOW_SECONDS;
/// `Retry-After` when every wait slot is taken: a slot frees when any wait ends.
const WAIT_RETRY_SECONDS: u64 = 2;

/// Takes one request from the service's budget, or refuses with 429 and when to retry.
pub async fn take_request(state: &AppState, service: &ServiceRow) -> Result<(), Problem> {
    let per_minute = state.core.config.token_api.of(&service.id).requests_per_minute;
    match state.core.store.request_budgets().take(&service.id, state.core.now(), per_minute).await? {
        Budget::Taken => Ok(()),
        Budget::Refused { retry_after } => {
            refused(state, Actor::Service(&service.id), "requests").await;
            Err(Problem::rate_limited(retry_after, "requests"))
        }
    }
}

/// Refuses an address locked for failed authentications (before its credentials are checked).
/// An address found not locked is not asked about again for
/// [`crate::store::token_api::UNLOCKED_FRESH`]: a lock set on another instance is seen that
/// much later; one set here at once (a counted failure forgets the address).
pub async fn check_address(state: &AppState, address: &str) -> Result<(), Problem> {
    let bucket = auth_bucket(address);
    if state.core.store.api_limits().recently_unlocked(&bucket) {
        return Ok(());
    }
    let now = state.core.now();
    match state.core.store.throttle().lock(&bucket).await? {
        Some(lock) if lock.locked_until > now => {
            refused(state, Actor::Visitor, "failed_authentication").await;
            Err(Problem::rate_limited((lock.locked_until - now) as u64, "failed_authentication"))
        }
        _ => {
            state.core.store.api_limits().found_unlocked(&bucket);
            Ok(())
        }
    }
}

/// Counts a failed authentication from `address`; the one that reaches [`AUTH_FAILURES`]
/// locks the address for [`AUTH_WINDOW_SECONDS`].
pub async fn count_failed_authentication(state: &AppState, address: &str) -> Result<(), Problem> {
    let now = state.core.now();
    let bucket = auth_bucket(address);
    state.core.store.api_limits().forget_unlocked(&bucket);
    let failures = state.core.store.throttle().count_failure(&bucket, now, now - AUTH_WINDOW_SECONDS).await?;
    if failures >= AUTH_FAILURES {
        tracing::warn!(%address, "token API: too many failed service authentications; address locked");
        state
            .core
            .store
            .throttle()
            .set_lock(&bucket, ThrottleLock { locked_until: now + AUTH_WINDOW_SECONDS, strikes: 1 })
            .await?;
        // A request that found the address unlocked meanwhile must not keep that answer.
        state.core.store.api_limits().forget_unlocked(&bucket);
    }
    Ok(())
}

fn auth_bucket(address: &str) -> String {
    format!("api-auth\n{address}")
}

/// Audits and counts a refusal; an audit that cannot be written is logged, the refusal stands.
async fn refused(state: &AppState, actor: Actor<'_>, limit: &'static str) {
    let detail = format!("limit={limit}");
    let event = AuditEvent::new(actor, "token_api.limited", None).detail(Some(&detail)).outcome(Outcome::Refused);
    if let Err(error) = state.core.store.audit().record(state.core.now(), event).await {
        tracing::warn!(%error, "token API: could not audit a rate-limited request");
    }
    crate::telemetry::token_api_answer("rate_limited");
}

/// One open wait's slot in its service's cap. Renewed in the background while held; freed
/// when dropped (the wait ended, the stream closed, the client went away).
#[derive(Debug)]
pub struct WaitSlot {
    id: String,
    store: Store,
    renewing: CancellationToken,
}

impl WaitSlot {
    /// Takes a slot for `service`, or refuses with 429 when its cap is reached.
    pub async fn take(state: &AppState, service: &ServiceRow) -> Result<Self, Problem> {
        let limits = &state.core.config.token_api;
        let max = i64::from(limits.of(&service.id).open_waits);
        let lease = limits.wait_lease;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let now = state.core.now();
        if !state
            .core
            .store
            .api_limits()
            .wait_slot_take(&id, &service.id, now, now + lease.as_secs() as i64, max)
            .await?
        {
            refused(state, Actor::Service(&service.id), "open_waits").await;
            return Err(Problem::rate_limited(WAIT_RETRY_SECONDS, "open_waits"));
        }
        let renewing = CancellationToken::new();
        tokio::spawn(renew(state.core.store.clone(), state.core.clock.clone(), id.clone(), lease, renewing.clone()));
        Ok(Self { id, store: state.core.store.clone(), renewing })
    }
}

/// Renews the slot's lease three times per lease until cancelled.
async fn renew(store: Store, clock: SharedClock, id: String, lease: Duration, cancelled: CancellationToken) {
    loop {
        tokio::select! {
            _ = cancelled.cancelled() => return,
            _ = tokio::time::sleep(lease / 3) => {}
        }
        if let Err(error) = store.api_limits().wait_slot_renew(&id, clock.now() + lease.as_secs() as i64).await {
            tracing::debug!(%error, "token API: could not renew a wait slot; it lapses at its lease");
        }
    }
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        self.renewing.cancel();
        let (store, id) = (self.store.clone(), std::mem::take(&mut self.id));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(error) = store.api_limits().wait_slot_release(&id).await {
                    tracing::debug!(%error, "token API: could not free a wait slot; it lapses at its lease");
                }
            });
        }
    }
}
