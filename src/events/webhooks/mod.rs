//! Delivering webhook events to services, after the Standard Webhooks convention.
//!
//! Events are rows of the outbox (`crate::store::webhooks`), written in the transaction
//! of the change they report. A background task on every instance ([`start`]) delivers them:
//! - **promptly**: the store wakes it after a commit on this instance; a poll every
//!   `[webhooks] poll_interval` is the backstop (other instances' events, retries);
//! - **once per attempt across instances**: an attempt is claimed with a compare-and-swap and a
//!   lease; a killed instance's lease lapses and another takes over. Delivery is at least once:
//!   a receiver that answered but whose answer was lost gets the event again, with the same id;
//! - **in order per connection**: only the oldest pending event of a (service, connection) is
//!   ever due;
//! - **with backoff**: 5 s doubling to an hour, plus up to half again at random, within
//!   `[webhooks] retry_window` of the event; then the event is dead-lettered (`admin webhooks
//!   list --status dead`, re-sent with `admin webhooks resend`);
//! - a receiver's 2xx is delivered; 410 Gone disables the webhook (audited); anything else, a
//!   timeout or a refused connection is retried.

mod deliver;
pub mod endpoint;
pub mod signing;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::config::webhooks::WebhookSettings;
use crate::crypto::Sealer;
use crate::store::Store;
use crate::store::webhooks::DeliveryRow;

pub use deliver::{RETRY_BASE_SECONDS, RETRY_MAX_SECONDS, retry_delay};

/// Attempts in flight at once on one instance (at most one per connection and service).
const IN_FLIGHT: usize = 64;

/// What the delivery task needs.
#[derive(Clone)]
pub struct Deliveries {
    pub(crate) store: Store,
    pub(crate) sealer: Arc<Sealer>,
    pub(crate) clock: SharedClock,
    pub(crate) settings: WebhookSettings,
    pub(crate) http: reqwest::Client,
    /// This process, as a lease holder.
    pub(crate) holder: Arc<str>,
}

impl Deliveries {
    pub fn new(store: Store, sealer: Arc<Sealer>, clock: SharedClock, settings: WebhookSettings) -> Self {
        let http = endpoint::client(&settings);
        let holder = format!("webhooks-{}", uuid::Uuid::new_v4().simple()).into();
        Self { store, sealer, clock, settings, http, holder }
    }

    /// Writes the events of service-caused authorizations that expired since the retry window
    /// began (a sweep: nothing else notices an authorization that nobody finished).
    async fn note_expired_authorizations(&self) {
        let now = self.clock.now();
        let window = i64::try_from(self.settings.retry_window.as_secs()).unwrap_or(i64::MAX / 4);
        if let Err(error) = self.store.webhook_events().note_expired_authorizations(now - window, now).await {
            tracing::warn!(%error, "could not note expired authorizations for webhooks");
        }
    }

    /// Claims up to `limit` attempts that are due now (at most one per service and connection:
    /// the oldest event still pending there), each with its claimed version.
    async fn claim_due(&self, limit: usize) -> Vec<(DeliveryRow, i64)> {
        let now = self.clock.now();
        let due = match self.store.webhook_events().due(now, i64::try_from(limit).unwrap_or(64)).await {
            Ok(due) => due,
            Err(error) => {
                tracing::warn!(%error, "could not read due webhook deliveries");
                return Vec::new();
            }
        };
        let lease_until = now + self.lease_seconds();
        let mut claimed = Vec::new();
        for row in due {
            match self.store.webhook_events().claim(&row, &self.holder, now, lease_until).await {
                Ok(Some(version)) => claimed.push((row, version)),
                Ok(None) => {}
                Err(error) => tracing::warn!(%error, "could not claim a webhook delivery"),
            }
        }
        claimed
    }

    /// The claim outlives one attempt's timeout with room for writing its outcome.
    fn lease_seconds(&self) -> i64 {
        i64::try_from(self.settings.timeout.as_secs()).unwrap_or(60) * 2 + 10
    }
}

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
