//! The token API's audit rows, written in batches. Every answered token request is audited; one
//! insert per request was one of two database writes on a path that otherwise only reads.
//!
//! A request puts its event on a bounded queue ([`CAPACITY`]) and is answered once the event is
//! on it; one writer task takes whatever is waiting and what arrives within [`GATHER`] (up to
//! [`BATCH`]) and writes it in one transaction, so under load a batch holds what arrived while
//! the previous one was written.
//! - **Back-pressure, never a drop:** a full queue makes the request wait for room.
//! - **A clean stop loses nothing:** [`AuditQueue::flush`] closes the queue and waits
//!   for the writer to write what is on it; `App::run` calls it after the last connection
//!   closed (SIGTERM), and [`Store::close`] before the pool closes (the test harness's stop).
//!   An event queued after the close is written directly.
//! - **kill -9** loses what is on the queue and the batch being gathered or written: at most
//!   [`CAPACITY`] + [`BATCH`] events, in practice the requests of the last [`GATHER`] and of
//!   the last write's duration
//!   (`docs/performance.md` gives the measured high-water mark, [`AuditQueue::peak`]).
//! - **Nothing per row beyond the row itself:** each batch is written as
//!   [`crate::store::audit::batches`] says.
//! - A batch that cannot be written is retried ([`RETRIES`], then logged as lost with its count:
//!   the database is down, and no request could be answered anyway).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::clock::Timestamp;
use crate::store::audit::batches::{QueuedEvent, TextIds};
use crate::store::audit::log::AuditEvent;
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::kept::Kept;
use crate::store::machinery::store::Store;

/// The handle on the token API's audit queue: `store.audit_queue()`.
#[derive(Debug, Clone, Copy)]
pub struct AuditQueue<'s> {
    pub(in crate::store) store: &'s Store,
}

/// Events the queue holds before requests wait for room.
pub const CAPACITY: usize = 4096;
/// The most events one transaction writes.
pub const BATCH: usize = 512;
/// How long the writer, having taken what was waiting, gathers more before it writes (unless
/// the batch is full or the queue closed). A batch costs the database a transaction and a few
/// statements whatever its size, and the writer a wake-up per statement: without the pause,
/// a steady stream of requests was written a handful of rows at a time and the writer spent
/// more on waking and committing than on rows. It is also what a `kill -9` can lose beyond the
/// queue: the rows of the last [`GATHER`].
pub const GATHER: Duration = Duration::from_millis(5);
/// Attempts at writing one batch before it is given up (a pause of [`RETRY_PAUSE`] between).
const RETRIES: u32 = 25;
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// The queue and its writer; absent until [`AuditQueue::start_writer`] (admin commands write
/// directly).
#[derive(Debug, Default)]
pub(in crate::store) struct Queue {
    sender: Mutex<Option<mpsc::Sender<QueuedEvent>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// The most events seen waiting at once since start.
    peak: AtomicUsize,
}

impl Queue {
    fn sender(&self) -> Option<mpsc::Sender<QueuedEvent>> {
        self.sender.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    async fn flush(&self) {
        drop(self.sender.lock().unwrap_or_else(|p| p.into_inner()).take());
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(writer) = writer
            && let Err(error) = writer.await
        {
            tracing::error!(%error, "the audit writer failed");
        }
    }
}

/// What is still queued is written before the pool closes.
impl Kept for Queue {
    fn before_close(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.flush())
    }
}

impl AuditQueue<'_> {
    /// Starts the batch writer (once; the server calls it as it starts).
    pub fn start_writer(self) {
        let queue = self.store.kept::<Queue>();
        let mut sender = queue.sender.lock().unwrap_or_else(|p| p.into_inner());
        if sender.is_some() {
            return;
        }
        let (tx, rx) = mpsc::channel(CAPACITY);
        *sender = Some(tx);
        let writer = tokio::spawn(write_batches(self.store.clone(), rx));
        *queue.writer.lock().unwrap_or_else(|p| p.into_inner()) = Some(writer);
    }

    /// Appends one event through the queue (see the module): returns once it is queued, waiting
    /// for room when the queue is full. Without a writer (or after the flush) it is written now.
    pub async fn record(self, at: Timestamp, event: AuditEvent<'_>) -> StoreResult<()> {
        let queue = self.store.kept::<Queue>();
        let Some(sender) = queue.sender() else { return self.store.audit().record(at, event).await };
        if sender.send(QueuedEvent::of(at, &event)).await.is_err() {
            return self.store.audit().record(at, event).await;
        }
        let waiting = sender.max_capacity() - sender.capacity();
        queue.peak.fetch_max(waiting, Ordering::Relaxed);
        Ok(())
    }

    /// Closes the queue and waits until everything on it is written. Idempotent.
    pub async fn flush(self) {
        self.store.kept::<Queue>().flush().await;
    }

    /// The most audit events seen waiting on the queue at once since start: what a kill -9
    /// at that moment would have lost.
    pub fn peak(self) -> usize {
        self.store.kept::<Queue>().peak.load(Ordering::Relaxed)
    }
}

/// Shared texts the writer remembers; past this many (a deployment with very many services ×
/// providers × answers) it forgets them all and asks the database again.
const KNOWN_TEXTS: usize = 10_000;

/// The writer: whatever is waiting, up to [`BATCH`], in one transaction, until the queue is
/// closed and empty.
async fn write_batches(store: Store, mut queue: mpsc::Receiver<QueuedEvent>) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut known = TextIds::new();
    while queue.recv_many(&mut batch, BATCH).await > 0 {
        let until = tokio::time::Instant::now() + GATHER;
        while batch.len() < BATCH {
            let room = BATCH - batch.len();
            match tokio::time::timeout_at(until, queue.recv_many(&mut batch, room)).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let mut attempt = 1;
        loop {
            match store.bounded(store.audit().write_batch(&batch, &known)).await {
                Ok(resolved) => {
                    if known.len() + resolved.len() > KNOWN_TEXTS {
                        known.clear();
                    }
                    known.extend(resolved);
                    break;
                }
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
            event.count();
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
        store.audit_queue().start_writer();
        let burst: Vec<_> = (0..2_000)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    let detail = format!("n={i}");
                    let event = AuditEvent::new(Actor::Service("svc_a"), "token_api.token", None).detail(Some(&detail));
                    store.audit_queue().record(i, event).await.unwrap();
                })
            })
            .collect();
        for task in burst {
            task.await.unwrap();
        }
        store.audit_queue().flush().await;
        let event = AuditEvent::new(Actor::Service("svc_a"), "token_api.token", None);
        store.audit_queue().record(1, event).await.unwrap();
        let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM audit_log WHERE action = 'token_api.token'")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(count, 2_001);
        assert!(store.audit_queue().peak() >= 1);
    }
}
