//! The token API's cap on open waits per service: long polls (`?wait=N`) and event streams each
//! hold a slot, a leased row renewed while open and deleted when it ends, so the slot of an
//! instance that died lapses after `wait_lease` ([`WaitSlot`]). Over the cap the answer is 429
//! `rate_limited` with `Retry-After`, audited as `token_api.limited` like the limits of service
//! authentication ([`crate::identity::service_limits`]).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::identity::service_auth_refusal::Limit;
use crate::identity::service_limits::refused;
use crate::problem::Problem;
use crate::state::AppState;
use crate::store::Store;
use crate::store::audit::Actor;
use crate::store::token_api::ServiceRow;

/// `Retry-After` when every wait slot is taken: a slot frees when any wait ends.
const WAIT_RETRY_SECONDS: u64 = 2;

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
            refused(&state.identity, Actor::Service(&service.id), Limit::OpenWaits).await;
            return Err(Problem::rate_limited(WAIT_RETRY_SECONDS, Limit::OpenWaits.as_str()));
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
