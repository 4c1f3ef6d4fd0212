//! The token API's audit rows, written in batches. Every answered token request is audited; one
//! insert per request was one of two database writes on a path that otherwise only reads.
//!
//! A request puts its event on a bounded queue ([`CAPACITY`]) and is answered once the event is
//! on it; one writer task takes whatever is waiting and what arrives within [`GATHER`] (up to
//! [`BATCH`]) and writes it in one transaction, so under load a batch holds what arrived while
//! the previous one was written.
//! - **Back-pressure, never a drop:** a full queue makes the request wait for room.
//! - **A clean stop loses nothing:** [`Store::flush_audit_queue`] closes the queue and waits
//!   for the writer to write what is on it; `App::run` calls it after the last connection
//!   closed (SIGTERM), and [`Store::close`] before the pool closes (the test harness's stop).
//!   An event queued after the close is written directly.
//! - **kill -9** loses what is on the queue and the batch being gathered or written: at most
//!   [`CAPACITY`] + [`BATCH`] events, in practice the requests of the last [`GATHER`] and of
//!   the last write's duration
//!   (`docs/performance.md` gives the measured high-water mark, [`Store::audit_queue_peak`]).
//! - **Nothing per row beyond the row itself:** a batch is one multi-row `INSERT`. Its
//!   token-API answers' searchable text is shared, one `audit_texts` row per distinct text (an
//!   answer differs from the next only in service, provider, answer and outcome), instead of a
//!   trigram index entry per row; its token-API answers are counted for the dashboard per
//!   (hour, service, outcome) group, one upsert each, instead of one per row (migration 0032:
//!   those per-row triggers cut the writer to a sixth of its speed).
//! - A batch that cannot be written is retried ([`RETRIES`], then logged as lost with its count:
//!   the database is down, and no request could be answered anyway).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::clock::Timestamp;
use crate::store::audit::log::{AuditEvent, Outcome, counted};
use crate::store::machinery::cache_effect::CacheEffect;
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::kept::Kept;
use crate::store::machinery::store::Store;

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
impl Kept for AuditQueue {
    fn before_close(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.flush())
    }
}

impl Store {
    /// Starts the batch writer (once; the server calls it as it starts).
    pub fn start_audit_writer(&self) {
        let queue = self.kept::<AuditQueue>();
        let mut sender = queue.sender.lock().unwrap_or_else(|p| p.into_inner());
        if sender.is_some() {
            return;
        }
        let (tx, rx) = mpsc::channel(CAPACITY);
        *sender = Some(tx);
        let writer = tokio::spawn(write_batches(self.clone(), rx));
        *queue.writer.lock().unwrap_or_else(|p| p.into_inner()) = Some(writer);
    }

    /// Appends one event through the queue (see the module): returns once it is queued, waiting
    /// for room when the queue is full. Without a writer (or after the flush) it is written now.
    pub async fn record_queued(&self, at: Timestamp, event: AuditEvent<'_>) -> StoreResult<()> {
        let queue = self.kept::<AuditQueue>();
        let Some(sender) = queue.sender() else { return self.record(at, event).await };
        if sender.send(QueuedEvent::of(at, &event)).await.is_err() {
            return self.record(at, event).await;
        }
        let waiting = sender.max_capacity() - sender.capacity();
        queue.peak.fetch_max(waiting, Ordering::Relaxed);
        Ok(())
    }

    /// Closes the queue and waits until everything on it is written. Idempotent.
    pub async fn flush_audit_queue(&self) {
        self.kept::<AuditQueue>().flush().await;
    }

    /// The most audit events seen waiting on the queue at once since start: what a kill -9
    /// at that moment would have lost.
    pub fn audit_queue_peak(&self) -> usize {
        self.kept::<AuditQueue>().peak.load(Ordering::Relaxed)
    }

    /// Writes one batch in one transaction: the shared texts it needs, its rows in one
    /// statement, and its token-API answers' hourly counts (see [`Batch`]). Returns the texts
    /// it resolved, for the writer to remember once they are committed.
    async fn write_audit_batch(&self, batch: &[QueuedEvent], known: &TextIds) -> StoreResult<TextIds> {
        let _turn = self.hot_write_turn().await;
        let mut tx = self.begin(CacheEffect::Nothing).await?;
        // Sorted, so two instances' writers take the rows they share in the same order.
        let wanted: BTreeSet<TextKey<'_>> = batch.iter().filter_map(QueuedEvent::shared_text).collect();
        let mut resolved = TextIds::new();
        for key in wanted {
            if known.contains_key(&key.owned()) {
                continue;
            }
            let (id,): (String,) = sqlx::query_as(
                "INSERT INTO audit_texts (id, text) VALUES ($1, LOWER($2 || ' ' || COALESCE($3, '') || ' ' || \
                 COALESCE($4, '') || ' ' || COALESCE($5, '') || ' ' || COALESCE($6, ''))) \
                 ON CONFLICT (text) DO UPDATE SET text = excluded.text RETURNING id",
            )
            .bind(uuid::Uuid::new_v4().simple().to_string())
            .bind(key.action)
            .bind(key.actor)
            .bind(key.outcome)
            .bind(key.provider)
            .bind(key.detail)
            .fetch_one(&mut *tx)
            .await?;
            resolved.insert(key.owned(), id);
        }
        // Each distinct text's id, looked up once per batch, not once per row.
        let ids: HashMap<TextKey<'_>, &str> = batch
            .iter()
            .filter_map(QueuedEvent::shared_text)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter_map(|key| {
                let owned = key.owned();
                let id = resolved.get(&owned).or_else(|| known.get(&owned))?;
                Some((key, id.as_str()))
            })
            .collect();
        let mut rest = batch;
        while !rest.is_empty() {
            let size = statement_rows(rest.len());
            let (rows, after) = rest.split_at(size);
            rest = after;
            let mut query = sqlx::query(insert_statement(size));
            for event in rows {
                let text_id = event.shared_text().and_then(|key| ids.get(&key).copied());
                query = query
                    .bind(event.at)
                    .bind(event.user_id.as_deref())
                    .bind(event.action.as_str())
                    .bind(event.provider.as_deref())
                    .bind(event.detail.as_deref())
                    .bind(event.actor.as_str())
                    .bind(event.outcome.as_str())
                    .bind(text_id);
            }
            query.execute(&mut *tx).await?;
        }
        for ((hour, service, outcome), n) in token_api_counts(batch) {
            sqlx::query(
                "INSERT INTO console_counts (hour, series, label, sub, n) VALUES ($1, 'token_api', $2, $3, $4) \
                 ON CONFLICT (hour, series, label, sub) DO UPDATE SET n = console_counts.n + excluded.n",
            )
            .bind(hour)
            .bind(service)
            .bind(outcome)
            .bind(n)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(resolved)
    }
}

/// The most rows one `INSERT` statement carries (8 values each). Kept small because SQLite
/// finds each of a statement's parameters by walking its list of parameter names, on every
/// execution (`sqlite3_bind_parameter_name`, which sqlx calls per value) and when preparing: a
/// statement's cost grows with the square of its values, so 256 rows per statement spent more
/// on finding parameters than on inserting.
const ROWS_PER_STATEMENT: usize = 16;

/// Rows in the next statement for `left` rows still to write: [`ROWS_PER_STATEMENT`], then
/// powers of two, so a batch of any size uses at most six statement texts, each prepared once
/// and then taken from the connection's statement cache.
fn statement_rows(left: usize) -> usize {
    if left >= ROWS_PER_STATEMENT { ROWS_PER_STATEMENT } else { 1 << left.ilog2() }
}

/// The `INSERT` of `rows` rows (a power of two up to [`ROWS_PER_STATEMENT`]), built once.
fn insert_statement(rows: usize) -> &'static str {
    static STATEMENTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let statements = STATEMENTS.get_or_init(|| {
        (0..=ROWS_PER_STATEMENT.ilog2())
            .map(|power| {
                let values: Vec<String> = (0..1usize << power)
                    .map(|row| {
                        let placeholders: Vec<String> =
                            (1..=8).map(|column| format!("${}", row * 8 + column)).collect();
                        format!("({})", placeholders.join(", "))
                    })
                    .collect();
                format!(
                    "INSERT INTO audit_log (at, user_id, action, provider, detail, actor, outcome, text_id) VALUES {}",
                    values.join(", ")
                )
            })
            .collect()
    });
    &statements[rows.ilog2() as usize]
}
/// Shared texts the writer remembers; past this many (a deployment with very many services ×
/// providers × answers) it forgets them all and asks the database again.
const KNOWN_TEXTS: usize = 10_000;

/// What makes an audit row's searchable text (migration 0032: such rows share one
/// `audit_texts` row per distinct text instead of each being indexed).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct TextKey<'a> {
    action: &'a str,
    actor: &'a str,
    outcome: &'a str,
    provider: Option<&'a str>,
    detail: Option<&'a str>,
}

type OwnedTextKey = (String, String, String, Option<String>, Option<String>);
type TextIds = HashMap<OwnedTextKey, String>;

impl TextKey<'_> {
    fn owned(&self) -> OwnedTextKey {
        (
            self.action.to_owned(),
            self.actor.to_owned(),
            self.outcome.to_owned(),
            self.provider.map(str::to_owned),
            self.detail.map(str::to_owned),
        )
    }
}

impl QueuedEvent {
    /// The text this row shares with others like it, for a token-API answer: its text names
    /// only the service, provider, answer and outcome (the user is a column, not text), so a
    /// deployment has a few such texts per service. Other queued rows (a forwarded gateway
    /// call names its user and its latency) are indexed one by one, as rows written directly.
    fn shared_text(&self) -> Option<TextKey<'_>> {
        self.action.starts_with("token_api.").then(|| TextKey {
            action: &self.action,
            actor: &self.actor,
            outcome: self.outcome.as_str(),
            provider: self.provider.as_deref(),
            detail: self.detail.as_deref(),
        })
    }
}

/// The batch's token-API answers per (hour, service, outcome): what the per-row trigger
/// `console_counts_token_api` counts for rows written one by one (migrations 0028, 0032).
fn token_api_counts(batch: &[QueuedEvent]) -> BTreeMap<(i64, &str, &str), i64> {
    let mut counts = BTreeMap::new();
    for event in batch {
        if let (true, Some(service)) = (event.action.starts_with("token_api."), event.actor.strip_prefix("service:")) {
            *counts.entry((event.at - event.at.rem_euclid(3600), service, event.outcome.as_str())).or_insert(0) += 1;
        }
    }
    counts
}

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
            match store.bounded(store.write_audit_batch(&batch, &known)).await {
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
            counted(&event.action, event.outcome);
        }
        batch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_of_any_size_is_written_in_statements_of_a_few_shapes_covering_every_row() {
        for len in 0..=(BATCH + 3) {
            let (mut left, mut shapes) = (len, BTreeSet::new());
            while left > 0 {
                let rows = statement_rows(left);
                assert!(rows >= 1 && rows <= left && rows.is_power_of_two(), "{len}: {rows} of {left}");
                let sql = insert_statement(rows);
                assert_eq!(sql.matches('(').count() - 1, rows, "{len}: one value list per row");
                assert!(sql.ends_with(&format!("${})", rows * 8)), "{len}: numbered to the last value");
                shapes.insert(rows);
                left -= rows;
            }
            assert!(shapes.len() <= 6, "{len}: {shapes:?}");
        }
    }
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
