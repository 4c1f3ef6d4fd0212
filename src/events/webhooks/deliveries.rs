//! What the delivery task works with ([`Deliveries`]): the database, the sealer for webhook
//! secrets, the clock, the settings, the HTTP client; and its two reads of the outbox, the
//! sweep of expired authorizations and the claim of the attempts that are due.

use std::sync::Arc;

use crate::clock::SharedClock;
use crate::config::webhooks::WebhookSettings;
use crate::crypto::Sealer;
use crate::store::Store;
use crate::store::webhooks::DeliveryRow;

use super::endpoint;

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
    pub(super) async fn note_expired_authorizations(&self) {
        let now = self.clock.now();
        let window = i64::try_from(self.settings.retry_window.as_secs()).unwrap_or(i64::MAX / 4);
        if let Err(error) = self.store.webhook_events().note_expired_authorizations(now - window, now).await {
            tracing::warn!(%error, "could not note expired authorizations for webhooks");
        }
    }

    /// Claims up to `limit` attempts that are due now (at most one per service and connection:
    /// the oldest event still pending there), each with its claimed version.
    pub(super) async fn claim_due(&self, limit: usize) -> Vec<(DeliveryRow, i64)> {
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
