//! Delivering webhook events to services (issue 27), after the Standard Webhooks convention.
//!
//! Events are rows of the outbox (`crate::store::webhook_events`), written in the transaction
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

use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::config::webhooks::WebhookSettings;
use crate::crypto::Sealer;
use crate::store::Store;

pub use deliver::{RETRY_BASE_SECONDS, RETRY_MAX_SECONDS, retry_delay};

/// Deliveries claimed per round (at most one per connection and service).
const BATCH: i64 = 64;

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

    /// One round: notes authorizations that expired, then claims and attempts what is due,
    /// concurrently. How many attempts it made.
    pub async fn run_once(&self) -> usize {
        let now = self.clock.now();
        let window = i64::try_from(self.settings.retry_window.as_secs()).unwrap_or(i64::MAX / 4);
        if let Err(error) = self.store.note_expired_authorizations(now - window, now).await {
            tracing::warn!(%error, "could not note expired authorizations for webhooks");
        }
        let due = match self.store.due_deliveries(now, BATCH).await {
            Ok(due) => due,
            Err(error) => {
                tracing::warn!(%error, "could not read due webhook deliveries");
                return 0;
            }
        };
        let lease_until = now + self.lease_seconds();
        let mut attempts = Vec::new();
        for row in due {
            match self.store.claim_delivery(&row, &self.holder, now, lease_until).await {
                Ok(Some(version)) => attempts.push(deliver::attempt(self, row, version)),
                Ok(None) => {}
                Err(error) => tracing::warn!(%error, "could not claim a webhook delivery"),
            }
        }
        let made = attempts.len();
        futures::future::join_all(attempts).await;
        made
    }

    /// The claim outlives one attempt's timeout with room for writing its outcome.
    fn lease_seconds(&self) -> i64 {
        i64::try_from(self.settings.timeout.as_secs()).unwrap_or(60) * 2 + 10
    }
}

/// Starts the delivery task; it stops with `shutdown`.
pub fn start(deliveries: Deliveries, shutdown: CancellationToken) {
    let wake = deliveries.store.webhook_wake();
    tokio::spawn(async move {
        loop {
            // Rounds back to back while there is work, so a backlog drains at once.
            while deliveries.run_once().await > 0 {
                if shutdown.is_cancelled() {
                    return;
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = wake.notified() => {}
                _ = tokio::time::sleep(deliveries.settings.poll_interval) => {}
            }
        }
    });
}
