//! The webhook outbox (migration 0024): one row per event per service that has a webhook,
//! written in the transaction of the change it reports ([`crate::store::webhooks::events`]),
//! then delivered by `src/events/webhooks`.
//!
//! An attempt is claimed with a compare-and-swap on `version` plus a lease, so one process
//! delivers it whichever instance sees it first, and a killed one's lease lapses. Within one
//! service and one connection (`ordering_key`: user and provider) only the oldest pending event
//! is ever due: a later one waits until the earlier is delivered or dead.

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::store::Store;
use crate::store::machinery::write::{On, Write};
use crate::store::webhooks::events::{EventType, InsertEvent, NewEvent, new_event_id};

/// The handle on the webhook outbox: `store.webhook_events()`.
#[derive(Debug, Clone, Copy)]
pub struct WebhookEvents<'s> {
    pub(in crate::store) store: &'s Store,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    Pending,
    Delivered,
    /// The retry window passed (or the webhook was disabled) without a 2xx.
    Dead,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Dead => "dead",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "pending" => Some(DeliveryStatus::Pending),
            "delivered" => Some(DeliveryStatus::Delivered),
            "dead" => Some(DeliveryStatus::Dead),
            _ => None,
        }
    }
}

/// One delivery as the worker and the operator see it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeliveryRow {
    pub seq: i64,
    pub event_id: String,
    pub service_id: String,
    pub event_type: String,
    pub payload: String,
    pub status: DeliveryStatus,
    pub attempts: i64,
    pub next_attempt_at: Timestamp,
    pub last_error: Option<String>,
    pub created_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    /// The claim's version: the worker's later writes are conditioned on it.
    #[serde(skip)]
    pub version: i64,
}

#[derive(sqlx::FromRow)]
struct RawDeliveryRow {
    seq: i64,
    event_id: String,
    service_id: String,
    event_type: String,
    payload: String,
    status: String,
    attempts: i64,
    next_attempt_at: i64,
    last_error: Option<String>,
    created_at: i64,
    finished_at: Option<i64>,
    version: i64,
}

impl TryFrom<RawDeliveryRow> for DeliveryRow {
    type Error = StoreError;

    fn try_from(raw: RawDeliveryRow) -> Result<Self, Self::Error> {
        let status = DeliveryStatus::parse(&raw.status)
            .ok_or_else(|| StoreError::Corrupt(format!("webhook event {} has status {:?}", raw.seq, raw.status)))?;
        Ok(DeliveryRow {
            seq: raw.seq,
            event_id: raw.event_id,
            service_id: raw.service_id,
            event_type: raw.event_type,
            payload: raw.payload,
            status,
            attempts: raw.attempts,
            next_attempt_at: raw.next_attempt_at,
            last_error: raw.last_error,
            created_at: raw.created_at,
            finished_at: raw.finished_at,
            version: raw.version,
        })
    }
}

const DELIVERY_COLUMNS: &str = "seq, event_id, service_id, event_type, payload, status, attempts, next_attempt_at, last_error, created_at, finished_at, version";

/// How an attempt ended, for [`WebhookEvents::finish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptOutcome {
    Delivered,
    /// Try again at this time.
    Retry {
        at: Timestamp,
        error: String,
    },
    /// Give up: the retry window passed, or the receiver asked to be left alone (410).
    Dead {
        error: String,
    },
}

impl WebhookEvents<'_> {
    /// Events that may be attempted now, oldest first, at most `limit`, at most one per
    /// (service, connection): the oldest still pending there.
    pub async fn due(self, now: Timestamp, limit: i64) -> StoreResult<Vec<DeliveryRow>> {
        sqlx::query_as::<_, RawDeliveryRow>(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_events e WHERE e.status = 'pending' AND e.next_attempt_at <= $1 \
             AND (e.lease_until IS NULL OR e.lease_until <= $1) \
             AND NOT EXISTS (SELECT 1 FROM webhook_events p WHERE p.service_id = e.service_id \
                 AND p.ordering_key = e.ordering_key AND p.status = 'pending' AND p.seq < e.seq) \
             ORDER BY e.seq LIMIT $2"
        ))
        .bind(now)
        .bind(limit)
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(DeliveryRow::try_from)
        .collect()
    }

    /// Claims one attempt for `holder` until `lease_until`, if the row is still as read and
    /// nobody holds a live lease. The claimed version on success.
    pub async fn claim(
        self,
        row: &DeliveryRow,
        holder: &str,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> StoreResult<Option<i64>> {
        let done = sqlx::query(
            "UPDATE webhook_events SET lease_holder = $1, lease_until = $2, version = version + 1 \
             WHERE seq = $3 AND version = $4 AND status = 'pending' AND (lease_until IS NULL OR lease_until <= $5)",
        )
        .bind(holder)
        .bind(lease_until)
        .bind(row.seq)
        .bind(row.version)
        .bind(now)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok((done.rows_affected() == 1).then_some(row.version + 1))
    }

    /// Records how a claimed attempt ended, if `holder` still holds the claim at `version`.
    pub async fn finish(
        self,
        seq: i64,
        version: i64,
        holder: &str,
        outcome: &AttemptOutcome,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let (status, next, error, finished) = match outcome {
            AttemptOutcome::Delivered => ("delivered", now, None, Some(now)),
            AttemptOutcome::Retry { at, error } => ("pending", *at, Some(error.as_str()), None),
            AttemptOutcome::Dead { error } => ("dead", now, Some(error.as_str()), Some(now)),
        };
        let done = sqlx::query(
            "UPDATE webhook_events SET status = $1, next_attempt_at = $2, last_error = $3, finished_at = $4, \
             attempts = attempts + 1, lease_holder = NULL, lease_until = NULL, version = version + 1 \
             WHERE seq = $5 AND version = $6 AND lease_holder = $7",
        )
        .bind(status)
        .bind(next)
        .bind(error)
        .bind(finished)
        .bind(seq)
        .bind(version)
        .bind(holder)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The newest deliveries, optionally of one service and in one status.
    pub async fn list(
        self,
        service_id: Option<&str>,
        status: Option<DeliveryStatus>,
        limit: i64,
    ) -> StoreResult<Vec<DeliveryRow>> {
        sqlx::query_as::<_, RawDeliveryRow>(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_events WHERE ($1 IS NULL OR service_id = $1) \
             AND ($2 IS NULL OR status = $2) ORDER BY seq DESC LIMIT $3"
        ))
        .bind(service_id)
        .bind(status.map(DeliveryStatus::as_str))
        .bind(limit)
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(DeliveryRow::try_from)
        .collect()
    }

    /// Puts every delivery of `event_id` (optionally for one service) back in the queue, due
    /// now, with a fresh retry window. How many.
    pub async fn resend(self, event_id: &str, service_id: Option<&str>, now: Timestamp) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE webhook_events SET status = 'pending', next_attempt_at = $1, created_at = $1, finished_at = NULL, \
             lease_holder = NULL, lease_until = NULL, version = version + 1 \
             WHERE event_id = $2 AND ($3 IS NULL OR service_id = $3) AND status <> 'pending'",
        )
        .bind(now)
        .bind(event_id)
        .bind(service_id)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        if done.rows_affected() > 0 {
            self.store.webhooks().wake();
        }
        Ok(done.rows_affected())
    }

    /// Writes `authorization.expired` once for every authorization a service with a webhook
    /// caused that ran out of time unfinished (expired at or before `now`, after `since`).
    pub async fn note_expired_authorizations(self, since: Timestamp, now: Timestamp) -> StoreResult<u64> {
        let rows: Vec<(String, String, String, String, String)> = sqlx::query_as(
            "SELECT a.id, a.user_id, a.provider, a.scopes, s.id FROM authorizations a \
             JOIN services s ON a.client_key = 'service:' || s.id \
             WHERE s.webhook_url IS NOT NULL AND s.webhook_disabled_at IS NULL \
             AND a.status IN ('pending', 'redirected') AND a.expires_at <= $1 AND a.expires_at > $2 \
             AND NOT EXISTS (SELECT 1 FROM webhook_events e WHERE e.service_id = s.id AND e.dedupe_key = 'expired:' || a.id)",
        )
        .bind(now)
        .bind(since)
        .fetch_all_in(self.store.read())
        .await?;
        let mut written = 0;
        for (id, user_id, provider, scopes, service_id) in rows {
            let scopes: Vec<&str> = scopes.split_whitespace().collect();
            let mut event = NewEvent::new(EventType::AuthorizationExpired, &user_id, &provider)
                .with("authorization_id", id.as_str())
                .with("scopes", scopes);
            event.service_id = Some(service_id);
            let event_id = new_event_id();
            // A second instance sweeping at the same moment hits the unique (service, dedupe
            // key) index: that event is already written.
            let dedupe_key = format!("expired:{id}");
            let insert = InsertEvent { event: &event, event_id: &event_id, dedupe_key: Some(&dedupe_key), now };
            match insert.run(On::Alone(self.store)).await {
                Ok(n) => written += n,
                Err(StoreError::Conflict) => {}
                Err(error) => return Err(error),
            }
        }
        if written > 0 {
            self.store.webhooks().wake();
        }
        Ok(written)
    }

    pub(in crate::store) async fn bury_pending(self, service_id: &str, why: &str, now: Timestamp) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE webhook_events SET status = 'dead', last_error = $1, finished_at = $2, lease_holder = NULL, \
             lease_until = NULL, version = version + 1 WHERE service_id = $3 AND status = 'pending'",
        )
        .bind(why)
        .bind(now)
        .bind(service_id)
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok(done.rows_affected())
    }
}
