//! The delivery task on every instance: sweeps, claims what is due and runs each attempt on its
//! own, woken by the store after a commit here or by its poll.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::deliver;
use super::deliveries::Deliveries;

/// Attempts in flight at once on one instance (at most one per connection and service).
const IN_FLIGHT: usize = 64;

/// Starts the delivery task; it stops with `shutdown`.
///
/// Each attempt runs on its own (up to [`IN_FLIGHT`] at once), so a receiver that is slow to answer
/// holds up only its own connection's later events, never other services' or other users'.
/// An attempt that finishes makes the next event of its connection due: the task claims again
/// at once. On shutdown the task stops claiming; attempts in flight finish while the process
/// is still stopping, or their leases lapse and another instance makes them again (same id).
pub fn start(deliveries: Deliveries, shutdown: CancellationToken) {
    let wake = deliveries.store.webhooks().waker();
    tokio::spawn(async move {
        let mut running = tokio::task::JoinSet::new();
        let mut swept_at: Option<tokio::time::Instant> = None;
        loop {
            if swept_at.is_none_or(|at| at.elapsed() >= deliveries.settings.poll_interval) {
                deliveries.note_expired_authorizations().await;
                swept_at = Some(tokio::time::Instant::now());
            }
            let free = IN_FLIGHT.saturating_sub(running.len());
            if free > 0 {
                for (row, version) in deliveries.claim_due(free).await {
                    let deliveries = deliveries.clone();
                    running.spawn(async move { deliver::attempt(&deliveries, row, version).await });
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = wake.notified() => {}
                Some(_) = running.join_next(), if !running.is_empty() => {}
                _ = tokio::time::sleep(deliveries.settings.poll_interval) => {}
            }
        }
        let finish = async { while running.join_next().await.is_some() {} };
        if tokio::time::timeout(deliveries.settings.timeout + Duration::from_secs(5), finish).await.is_err() {
            tracing::warn!("webhook attempts still in flight at shutdown are left to their leases");
        }
    });
}
