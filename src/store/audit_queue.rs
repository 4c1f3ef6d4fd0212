//! The token API's audit rows, written in batches (issue: the token API as fast as the MCP
//! face). Every answered token request is audited; one insert per request was one of two
//! database writes on a path that otherwise only reads.
//!
//! A request puts its event on a bounded queue ([`CAPACITY`]) and is answered once the event is
//! on it; one writer task takes whatever is waiting (up to [`BATCH`]) and writes it in one
//! transaction, so under load a batch holds what arrived while the previous one was written.
//! - **Back-pressure, never a drop:** a full queue makes the request wait for room.
//! - **A clean stop loses nothing:** [`Store::flush_audit_queue`] closes the queue and waits
//!   for the writer to write what is on it; `App::run` calls it after the last connection
//!   closed (SIGTERM), and [`Store::close`] before the pool closes (the test harness's stop).
//!   An event queued after the close is written directly.
//! - **kill -9** loses what is on the queue and the batch being written: at most
//!   [`CAPACITY`] + [`BATCH`] events, in practice the requests of the last write's duration
//!   (`docs/performance.md` gives the measured high-water mark, [`Store::audit_queue_peak`]).
//! - A batch that cannot be written is retried ([`RETRIES`], then logged as lost with its count:
//!   the database is down, and no request could be answered anyway).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::audit::{AuditEvent, Outcome};
use super::{CacheEffect, Store, StoreResult};
use crate::clock::Timestamp;

/// Events the queue holds before requests wait for room.
pub const CAPACITY: usize = 4096;
/// The most events one transaction writes.
pub const BATCH: usize = 512;
/// Attempts at writing one batch before it is given up (a pause of [`RETRY_PAUSE`] between).
const RETRIES: u32 = 25;
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// An [`AuditEvent`] that owns its text, for the queue.
#[derive(Debug)]
struct QueuedEvent {
    at: Timestamp,
    actor: String,
    action: String,
    outcome: Outcome,
    user_id: Option<String>,
    provider: Option<String>,
    detail: Option<String>,
}

impl QueuedEvent {
    fn of(at: Timestamp, event: &AuditEvent<'_>) -> Self {
        QueuedEvent {
            at,
            actor: event.actor.as_text(),
            action: event.action.to_owned(),
            outcome: event.outcome,
            user_id: event.user_id.map(str::to_owned),
            provider: event.provider.map(str::to_owned),
            detail: event.detail.map(str::to_owned),
        }
    }
}

/// The queue and its writer; absent until [`Store::start_audit_writer`] (admin commands write
/// directly).
#[derive(Debug, Default)]
pub struct AuditQueue {
    sender: Mutex<Option<mpsc::Sender<QueuedEvent>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// The most events seen waiting at once since start.
    peak: AtomicUsize,
}

impl AuditQueue {
    fn sender(&self) -> Option<mpsc::Sender<QueuedEvent>> {
        self.sender.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Store {
    /// Starts the batch writer (once; the server calls it as it starts).
    pub fn start_audit_writer(&self) {
        let mut sender = self.audit_queue.sender.lock().unwrap_or_else(|p| p.into_inner());
        if sender.is_some() {
            return;
        }
        let (tx, rx) = mpsc::channel(CAPACITY);
        *sender = Some(tx);
        let writer = tokio::spawn(write_batches(self.clone(), rx));
        *self.audit_queue.writer.lock().unwrap_or_else(|p| p.into_inner()) = Some(writer);
    }

    /// Appends one event through the queue (see the module): returns once it is queued, waiting
    /// for room when the queue is full. Without a writer (or after the flush) it is written now.
    pub async fn record_queued(&self, at: Timestamp, event: AuditEvent<'_>) -> StoreResult<()> {
        let Some(sender) = self.audit_queue.sender() else { return self.record(at, event).await };
        if sender.send(QueuedEvent::of(at, &event)).await.is_err() {
            return self.record(at, event).await;
        }
        let waiting = sender.max_capacity() - sender.capacity();
        self.audit_queue.peak.fetch_max(waiting, Ordering::Relaxed);
        Ok(())
    }

    /// Closes the queue and waits until everything on it is written. Idempotent.
    pub async fn flush_audit_queue(&self) {
        drop(self.audit_queue.sender.lock().unwrap_or_else(|p| p.into_inner()).take());
        let writer = self.audit_queue.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(writer) = writer
            && let Err(error) = writer.await
        {
            tracing::error!(%error, "the audit writer failed");
        }
    }

    /// The most audit events seen waiting on the queue at once since start: what a kill -9
    /// at that moment would have lost.
    pub fn audit_queue_peak(&self) -> usize {
        self.audit_queue.peak.load(Ordering::Relaxed)
    }

    async fn write_audit_batch(&self, batch: &[QueuedEvent]) -> StoreResult<()> {
        let mut tx = self.begin(CacheEffect::Nothing).await?;
        for event in batch {
            sqlx::query(
                "INSERT INTO audit_log (at, user_id, action, provider, detail, actor, outcome) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(event.at)
            .bind(event.user_id.as_deref())
            .bind(&event.action)
            .bind(event.provider.as_deref())
            .bind(event.detail.as_deref())
            .bind(&event.actor)
            .bind(event.outcome.as_str())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}

/// The writer: whatever is waiting, up to [`BATCH`], in one transaction, until the queue is
/// closed and empty.
async fn write_batches(store: Store, mut queue: mpsc::Receiver<QueuedEvent>) {
    let mut batch = Vec::with_capacity(BATCH);
    while queue.recv_many(&mut batch, BATCH).await > 0 {
        let mut attempt = 1;
        loop {
            match store.bounded(store.write_audit_batch(&batch)).await {
                Ok(()) => break,
                Err(error) if attempt < RETRIES => {
                    tracing::warn!(%error, events = batch.len(), attempt, "could not write audit events; retrying");
                    attempt += 1;
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Err(error) => {
                    tracing::error!(%error, events = batch.len(), "audit events lost: the database refused them");
                    break;
                }
            }
        }
        for event in &batch {
            super::audit::counted(&event.action, event.outcome);
        }
        batch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::audit::Actor;

    #[tokio::test]
    async fn queued_events_are_all_written_by_the_flush_and_later_ones_directly() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}/t.db?mode=rwc", dir.path().display())).await.unwrap();
        store.migrate().await.unwrap();
        store.start_audit_writer();
        let burst: Vec<_> = (0..2_000)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    let detail = format!("n={i}");
                    let event = AuditEvent::new(Actor::Service("svc_a"), "token_api.token", None).detail(Some(&detail));
                    store.record_queued(i, event).await.unwrap();
                })
            })
            .collect();
        for task in burst {
            task.await.unwrap();
        }
        store.flush_audit_queue().await;
        let event = AuditEvent::new(Actor::Service("svc_a"), "token_api.token", None);
        store.record_queued(1, event).await.unwrap();
        let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM audit_log WHERE action = 'token_api.token'")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(count, 2_001);
        assert!(store.audit_queue_peak() >= 1);
    }
}
