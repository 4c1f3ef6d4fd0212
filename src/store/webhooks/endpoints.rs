//! Services' webhooks (migration 0024): the endpoint, its sealed signing secrets, and which
//! providers and services have a live webhook at all.
//!
//! That last answer is read by every grant change ([`crate::store::webhooks::events`]) to know
//! whether it must write an event, so it is cached under everyone's generation like the services
//! themselves: setting, rotating or removing a webhook is an UPDATE of `services`, which moves
//! `auth_epoch` (migration 0019) here at once and on every other instance within its watcher's
//! interval. With no webhook anywhere a grant change costs nothing more than before.

use std::collections::HashSet;
use std::sync::Arc;

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::StoreError;
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::generation_cache::GenerationCache;
use crate::store::machinery::kept::Kept;
use crate::store::machinery::store::Store;
use crate::store::machinery::transaction::Transaction;
use crate::store::machinery::write::On;
use crate::store::sealing::key_ids::key_id_sql;

/// The handle on services' webhooks: `store.webhooks()`.
#[derive(Debug, Clone, Copy)]
pub struct Webhooks<'s> {
    pub(in crate::store) store: &'s Store,
}

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
    /// Until the next [`Webhooks::wake`] (or at once, if one came since the last wait).
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.0.notified()
    }
}

impl Kept for WebhookWake {}

/// A service's sealed webhook secrets, for rewrapping.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SealedWebhookSecrets {
    pub service_id: String,
    pub current: Option<Vec<u8>>,
    pub previous: Option<Vec<u8>>,
}

impl Webhooks<'_> {
    /// Which providers and services have a live webhook (cached; see the module).
    pub async fn targets(self) -> StoreResult<Arc<WebhookTargets>> {
        let cache = self.store.kept::<TargetsCache>();
        if let Some(targets) = cache.0.get(&(), |_| self.store.cache_shared_generation()) {
            return Ok(targets);
        }
        let before = self.store.cache_tick();
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT id, providers FROM services WHERE webhook_url IS NOT NULL AND webhook_disabled_at IS NULL",
        )
        .fetch_all_in(self.store.read())
        .await?;
        let mut targets = WebhookTargets::default();
        for (id, providers) in rows {
            targets.providers.extend(providers.split_whitespace().map(str::to_owned));
            targets.services.insert(id);
        }
        let targets = Arc::new(targets);
        if let Some(before) = before {
            cache.0.insert(before, self.store.cache_shared_generation(), (), targets.clone());
        }
        Ok(targets)
    }

    /// Wakes this process's delivery worker (a new event, a resend).
    pub fn wake(self) {
        self.store.kept::<WebhookWake>().0.notify_one();
    }

    /// What [`Webhooks::wake`] notifies.
    pub fn waker(self) -> Arc<WebhookWake> {
        self.store.kept::<WebhookWake>()
    }

    /// The webhook of service `service_id`, if it has one.
    pub async fn by_service(self, service_id: &str) -> StoreResult<Option<WebhookRow>> {
        Ok(sqlx::query_as::<_, WebhookRow>(
            "SELECT id AS service_id, webhook_url AS url, webhook_secret_sealed AS secret_sealed, \
             webhook_previous_secret_sealed AS previous_secret_sealed, webhook_previous_until AS previous_until, \
             webhook_disabled_at AS disabled_at FROM services WHERE id = $1 AND webhook_url IS NOT NULL",
        )
        .bind(service_id)
        .fetch_optional_in(self.store.read())
        .await?)
    }

    /// Every service's webhook, by service id.
    pub async fn list(self) -> StoreResult<Vec<WebhookRow>> {
        Ok(sqlx::query_as::<_, WebhookRow>(
            "SELECT id AS service_id, webhook_url AS url, webhook_secret_sealed AS secret_sealed, \
             webhook_previous_secret_sealed AS previous_secret_sealed, webhook_previous_until AS previous_until, \
             webhook_disabled_at AS disabled_at FROM services WHERE webhook_url IS NOT NULL ORDER BY id",
        )
        .fetch_all_in(self.store.read())
        .await?)
    }

    /// Sets (or replaces) the webhook with a new secret; no previous secret stays valid. False
    /// when there is no such service.
    pub async fn set(self, service_id: &str, url: &str, secret_sealed: &[u8], now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE services SET webhook_url = $1, webhook_secret_sealed = $2, webhook_previous_secret_sealed = NULL, \
             webhook_previous_until = NULL, webhook_disabled_at = NULL, updated_at = $3 WHERE id = $4",
        )
        .bind(url)
        .bind(secret_sealed)
        .bind(now)
        .bind(service_id)
        // The services' cache and the webhook targets rest on this row.
        .execute(self.store.write(CacheEffect::Everyone))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Replaces the signing secret; the current one stays valid until `previous_until`. False
    /// when the service has no webhook.
    pub async fn rotate_secret(
        self,
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
        .execute(self.store.write(CacheEffect::Everyone))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Removes the webhook; its undelivered events are dead-lettered. False when it had none.
    pub async fn remove(self, service_id: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE services SET webhook_url = NULL, webhook_secret_sealed = NULL, webhook_previous_secret_sealed = NULL, \
             webhook_previous_until = NULL, webhook_disabled_at = NULL, updated_at = $1 WHERE id = $2 AND webhook_url IS NOT NULL",
        )
        .bind(now)
        .bind(service_id)
        .execute(self.store.write(CacheEffect::Everyone))
        .await?;
        if done.rows_affected() == 1 {
            self.store.webhook_events().bury_pending(service_id, "webhook removed", now).await?;
        }
        Ok(done.rows_affected() == 1)
    }

    /// The receiver answered 410 Gone: the webhook stays set but receives nothing until the
    /// operator sets it again; its undelivered events are dead-lettered. False when it was
    /// already disabled.
    pub async fn disable(self, service_id: &str, now: Timestamp) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE services SET webhook_disabled_at = $1 WHERE id = $2 AND webhook_url IS NOT NULL AND webhook_disabled_at IS NULL",
        )
        .bind(now)
        .bind(service_id)
        .execute(self.store.write(CacheEffect::Everyone))
        .await?;
        if done.rows_affected() == 1 {
            self.store
                .webhook_events()
                .bury_pending(service_id, "webhook disabled: the receiver answered 410", now)
                .await?;
        }
        Ok(done.rows_affected() == 1)
    }

    /// Services whose webhook secret (current or previous) is not sealed by `active` (there
    /// are few: no paging).
    pub async fn secrets_to_rewrap(self, active: &str) -> StoreResult<Vec<SealedWebhookSecrets>> {
        let current = key_id_sql(self.store.backend(), "webhook_secret_sealed");
        let previous = key_id_sql(self.store.backend(), "webhook_previous_secret_sealed");
        Ok(sqlx::query_as::<_, SealedWebhookSecrets>(&format!(
            "SELECT id AS service_id, webhook_secret_sealed AS current, webhook_previous_secret_sealed AS previous \
             FROM services WHERE (webhook_secret_sealed IS NOT NULL AND {current} <> $1) \
             OR (webhook_previous_secret_sealed IS NOT NULL AND {previous} <> $1) ORDER BY id"
        ))
        .bind(active)
        .fetch_all_in(self.store.read())
        .await?)
    }

    /// Replaces a service's sealed webhook secrets if both are still as read (a rotation or a
    /// new webhook meanwhile leaves the row for the next run).
    pub async fn rewrap_secrets(
        self,
        old: &SealedWebhookSecrets,
        current: Option<&[u8]>,
        previous: Option<&[u8]>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE services SET webhook_secret_sealed = $1, webhook_previous_secret_sealed = $2 \
             WHERE id = $3 AND webhook_secret_sealed IS NOT DISTINCT FROM $4 \
             AND webhook_previous_secret_sealed IS NOT DISTINCT FROM $5",
        )
        .bind(current)
        .bind(previous)
        .bind(&old.service_id)
        .bind(old.current.as_deref())
        .bind(old.previous.as_deref())
        .execute(self.store.write(CacheEffect::Everyone))
        .await
        .map_err(StoreError::from_write)?;
        Ok(done.rows_affected() == 1)
    }
}

impl Webhooks<'_> {
    /// `admin keys forget`'s step for webhooks, within its transaction: a replaced secret
    /// sealed with `key_id` stops signing at once; a current one takes the webhook away (the
    /// operator sets it again, with a new secret for the receiver). How many webhooks went.
    pub(in crate::store) async fn forget_sealed_by(
        self,
        tx: &mut Transaction<'_>,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let current = key_id_sql(self.store.backend(), "webhook_secret_sealed");
        let previous = key_id_sql(self.store.backend(), "webhook_previous_secret_sealed");
        let sql = format!(
            "UPDATE services SET webhook_previous_secret_sealed = NULL, webhook_previous_until = NULL \
             WHERE webhook_previous_secret_sealed IS NOT NULL AND {previous} = $1"
        );
        let forget_previous = sqlx::query(&sql).bind(key_id);
        // The services' cache and the webhook targets rest on these rows.
        On::Within(tx).execute(CacheEffect::Everyone, forget_previous).await.map_err(StoreError::from_write)?;
        let sql = format!(
            "UPDATE services SET webhook_url = NULL, webhook_secret_sealed = NULL, webhook_previous_secret_sealed = NULL, \
             webhook_previous_until = NULL, webhook_disabled_at = NULL, updated_at = $1 \
             WHERE webhook_secret_sealed IS NOT NULL AND {current} = $2"
        );
        let forget_current = sqlx::query(&sql).bind(now).bind(key_id);
        Ok(On::Within(tx)
            .execute(CacheEffect::Everyone, forget_current)
            .await
            .map_err(StoreError::from_write)?
            .rows_affected())
    }
}
