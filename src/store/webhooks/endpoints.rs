//! Services' webhooks (migration 0024): the endpoint, its sealed signing secrets, and which
//! providers and services have a live webhook at all.
//!
//! That last answer is read by every grant change ([`crate::store::grants::events`]) to know
//! whether it must write an event, so it is cached under everyone's generation like the services
//! themselves: setting, rotating or removing a webhook is an UPDATE of `services`, which moves
//! `auth_epoch` (migration 0019) here at once and on every other instance within its watcher's
//! interval. With no webhook anywhere a grant change costs nothing more than before.

use std::collections::HashSet;
use std::sync::Arc;

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::generation_cache::GenerationCache;
use crate::store::machinery::kept::Kept;
use crate::store::machinery::store::Store;

/// Which providers and services have a live webhook.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookTargets {
    pub providers: HashSet<String>,
    pub services: HashSet<String>,
}

/// A service's webhook as the delivery worker needs it (secrets still sealed).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct WebhookRow {
    pub service_id: String,
    pub url: String,
    pub secret_sealed: Vec<u8>,
    pub previous_secret_sealed: Option<Vec<u8>>,
    pub previous_until: Option<Timestamp>,
    pub disabled_at: Option<Timestamp>,
}

/// Which providers and services have a live webhook, as last read (one entry).
pub(in crate::store) struct TargetsCache(GenerationCache<(), Arc<WebhookTargets>>);

impl Default for TargetsCache {
    fn default() -> Self {
        Self(GenerationCache::new(1))
    }
}

impl Kept for TargetsCache {}

/// Wakes this process's webhook delivery after an event was written.
#[derive(Debug, Default)]
pub struct WebhookWake(tokio::sync::Notify);

impl WebhookWake {
    /// Until the next [`Store::wake_webhooks`] (or at once, if one came since the last wait).
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.0.notified()
    }
}

impl Kept for WebhookWake {}

impl Store {
    /// Which providers and services have a live webhook (cached; see the module).
    pub async fn webhook_targets(&self) -> StoreResult<Arc<WebhookTargets>> {
        let cache = self.kept::<TargetsCache>();
        if let Some(targets) = cache.0.get(&(), |_| self.cache_shared_generation()) {
            return Ok(targets);
        }
        let before = self.cache_tick();
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT id, providers FROM services WHERE webhook_url IS NOT NULL AND webhook_disabled_at IS NULL",
        )
        .fetch_all_in(self.read())
        .await?;
        let mut targets = WebhookTargets::default();
        for (id, providers) in rows {
            targets.providers.extend(providers.split_whitespace().map(str::to_owned));
            targets.services.insert(id);
        }
        let targets = Arc::new(targets);
        if let Some(before) = before {
            cache.0.insert(before, self.cache_shared_generation(), (), targets.clone());
        }
        Ok(targets)
    }

    /// Wakes this process's delivery worker (a new event, a resend).
    pub fn wake_webhooks(&self) {
        self.kept::<WebhookWake>().0.notify_one();
    }

    /// What [`Store::wake_webhooks`] notifies.
    pub fn webhook_wake(&self) -> Arc<WebhookWake> {
        self.kept::<WebhookWake>()
    }

    /// The webhook of service `service_id`, if it has one.
    pub async fn webhook(&self, service_id: &str) -> StoreResult<Option<WebhookRow>> {
        Ok(sqlx::query_as::<_, WebhookRow>(
            "SELECT id AS service_id, webhook_url AS url, webhook_secret_sealed AS secret_sealed, \
             webhook_previous_secret_sealed AS previous_secret_sealed, webhook_previous_until AS previous_until, \
             webhook_disabled_at AS disabled_at FROM services WHERE id = $1 AND webhook_url IS NOT NULL",
        )
        .bind(service_id)
        .fetch_optional_in(self.read())
        .await?)
    }

    /// Every service's webhook, by service id.
    pub async fn webhooks(&self) -> StoreResult<Vec<WebhookRow>> {
        Ok(sqlx::query_as::<_, WebhookRow>(
            "SELECT id AS service_id, webhook_url AS url, webhook_secret_sealed AS secret_sealed, \
             webhook_previous_secret_sealed AS previous_secret_sealed, webhook_previous_until AS previous_until, \
             webhook_disabled_at AS disabled_at FROM services WHERE webhook_url IS NOT NULL ORDER BY id",
        )
        .fetch_all_in(self.read())
        .await?)
    }

    /// Sets (or replaces) the webhook with a new secret; no previous secret stays valid. False
    /// when there is no such service.
    pub async fn set_webhook(
        &self,
        service_id: &str,
        url: &str,
        secret_sealed: &[u8],
        now: Timestamp,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE services SET webhook_url = $1, webhook_secret_sealed = $2, webhook_previous_secret_sealed = NULL, \
             webhook_previous_until = NULL, webhook_disabled_at = NULL, updated_at = $3 WHERE id = $4",
        )
        .bind(url)
        .bind(secret_sealed)
        .bind(now)
        .bind(service_id)
        // The services' cache and the webhook targets rest on this row.
        .execute(self.write(CacheEffect::Everyone))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Replaces the signing secret; the current one stays valid until `previous_until`. False
    /// when the service has no webhook.
    pub async fn rotate_webhook_secret(
        &self,
        service_id: &str,
        secret_sealed: &[u8],
        previous_until: Timestamp,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE services SET webhook_previous_secret_sealed = webhook_secret_sealed, webhook_previous_until = $1, \
             webhook_secret_sealed = $2, updated_at = $3 WHERE id = $4 AND webhook_url IS NOT NULL",
        )
        .bind(previous_until)
        .bind(secret_sealed)
        .bind(now)
        .bind(service_id)
        .execute(self.write(CacheEffect::Everyone))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Removes the webhook; its undelivered events are dead-lettered. False when it had none.
    pub async fn remove_webhook(&self, service_id: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE services SET webhook_url = NULL, webhook_secret_sealed = NULL, webhook_previous_secret_sealed = NULL, \
             webhook_previous_until = NULL, webhook_disabled_at = NULL, updated_at = $1 WHERE id = $2 AND webhook_url IS NOT NULL",
        )
        .bind(now)
        .bind(service_id)
        .execute(self.write(CacheEffect::Everyone))
        .await?;
        if done.rows_affected() == 1 {
            self.bury_pending(service_id, "webhook removed", now).await?;
        }
        Ok(done.rows_affected() == 1)
    }

    /// The receiver answered 410 Gone: the webhook stays set but receives nothing until the
    /// operator sets it again; its undelivered events are dead-lettered. False when it was
    /// already disabled.
    pub async fn disable_webhook(&self, service_id: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE services SET webhook_disabled_at = $1 WHERE id = $2 AND webhook_url IS NOT NULL AND webhook_disabled_at IS NULL",
        )
        .bind(now)
        .bind(service_id)
        .execute(self.write(CacheEffect::Everyone))
        .await?;
        if done.rows_affected() == 1 {
            self.bury_pending(service_id, "webhook disabled: the receiver answered 410", now).await?;
        }
        Ok(done.rows_affected() == 1)
    }

    async fn bury_pending(&self, service_id: &str, why: &str, now: Timestamp) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE webhook_events SET status = 'dead', last_error = $1, finished_at = $2, lease_holder = NULL, \
             lease_until = NULL, version = version + 1 WHERE service_id = $3 AND status = 'pending'",
        )
        .bind(why)
        .bind(now)
        .bind(service_id)
        .execute(self.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected())
    }
}
