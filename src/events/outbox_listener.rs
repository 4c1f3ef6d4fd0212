//! The other instances' signals on one PostgreSQL database: rows of the outbox table
//! ([`super::outbox_writer`]), announced with `LISTEN/NOTIFY` (migration 0010's trigger), read
//! again after a reconnect, and delivered to this process's listeners ([`super::bus`]).
//!
//! Why both: `NOTIFY` is delivered only to connections listening at that moment, so a listener
//! that is reconnecting (a restarted database, a dropped connection, `pg_terminate_backend`)
//! would miss what was sent meanwhile. After every (re)connection, once `LISTEN` is in place,
//! the listener reads the outbox rows newer than the last it saw, so nothing sent while it was
//! away is lost. Ids come from a sequence and two senders may commit out of order, so the
//! catch-up reads a little below the newest id seen and skips the ids already delivered.
//!
//! A silent connection (a network path that dropped without a reset) would never report an
//! error, so every [`CHECK_EVERY`] the listener pings its connection and reads the outbox once.

use std::collections::{HashSet, VecDeque};
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio_util::sync::CancellationToken;

use super::bus::Events;
use super::signal::Wire;
use crate::clock::SharedClock;
use crate::store::Store;

/// The `NOTIFY` channel migration 0010's trigger announces outbox rows on.
const CHANNEL: &str = "oauth_broker_signals";
/// The listener's connection names itself, followed by the process's origin id, so operators
/// (and tests) can find it in `pg_stat_activity`.
pub const LISTENER_APPLICATION_NAME: &str = "oauth-broker signals";
/// How far below the newest id seen a catch-up reads (rows committed out of order).
const CATCH_UP_SLACK: i64 = 1000;
/// Ids remembered as delivered; more than [`CATCH_UP_SLACK`], so every id a catch-up reads
/// again that was delivered is still known.
const REMEMBERED: usize = 4096;
/// Rows read per catch-up query.
const PAGE: i64 = 500;
/// Ping the listener's connection and read the outbox this often when nothing arrives.
const CHECK_EVERY: Duration = Duration::from_secs(30);
/// Outbox rows older than this are deleted: a listener away longer has restarted its
/// sessions anyway, and every waiter re-reads the database.
const KEEP_SECONDS: i64 = 3600;
/// Reconnection waits, doubling up to the maximum.
const FIRST_RETRY: Duration = Duration::from_millis(200);
const MAX_RETRY: Duration = Duration::from_secs(5);

/// Ids already delivered (or sent by this process), bounded.
#[derive(Debug, Default)]
struct Seen {
    order: VecDeque<i64>,
    ids: HashSet<i64>,
}

impl Seen {
    /// True the first time an id is offered.
    fn first_time(&mut self, id: i64) -> bool {
        if !self.ids.insert(id) {
            return false;
        }
        self.order.push_back(id);
        if self.order.len() > REMEMBERED
            && let Some(old) = self.order.pop_front()
        {
            self.ids.remove(&old);
        }
        true
    }
}

/// Where the listener is: the outbox rows it has handled.
struct Position {
    /// Rows up to this id were there before this process listened: never delivered.
    floor: i64,
    newest: i64,
    seen: Seen,
}

impl Events {
    /// PostgreSQL: delivers the other instances' signals to this process's listeners until
    /// `shutdown`, reconnecting (and catching up from the outbox) whenever the connection is
    /// lost; also prunes old outbox rows. Returns once the starting point is read, so a signal
    /// sent after this returns is delivered.
    pub async fn listen_to_other_instances(
        &self,
        database_url: &str,
        store: Store,
        clock: SharedClock,
        shutdown: CancellationToken,
    ) -> anyhow::Result<()> {
        let options = PgConnectOptions::from_str(database_url)?
            .application_name(&format!("{LISTENER_APPLICATION_NAME} {}", self.origin));
        let floor = store.signals().latest_id().await?;
        let mut position = Position { floor, newest: floor, seen: Seen::default() };
        let mut listener = match connect(&options).await {
            Ok(listener) => listener,
            Err(error) => {
                tracing::warn!(%error, "signal listener could not connect; retrying in the background");
                None
            }
        };
        let events = self.clone();
        tokio::spawn(async move {
            let mut wait = FIRST_RETRY;
            loop {
                if let Some(connected) = listener.take() {
                    wait = FIRST_RETRY;
                    events.catch_up(&store, &mut position).await;
                    let lost = events.listen(connected, &store, &clock, &mut position, &shutdown).await;
                    if !lost {
                        return;
                    }
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
                wait = (wait * 2).min(MAX_RETRY);
                match connect(&options).await {
                    Ok(connected) => {
                        tracing::info!("signal listener reconnected; reading what was sent meanwhile");
                        listener = connected;
                    }
                    Err(error) => tracing::warn!(%error, ?wait, "signal listener could not reconnect; retrying"),
                }
            }
        });
        Ok(())
    }

    /// Receives until the connection is lost (true) or `shutdown` (false).
    async fn listen(
        &self,
        mut listener: PgListener,
        store: &Store,
        clock: &SharedClock,
        position: &mut Position,
        shutdown: &CancellationToken,
    ) -> bool {
        let mut check = tokio::time::interval(CHECK_EVERY);
        check.tick().await;
        // None until the first prune, which runs at the first check.
        let mut pruned_at: Option<i64> = None;
        loop {
            let received = tokio::select! {
                _ = shutdown.cancelled() => return false,
                _ = check.tick() => None,
                received = listener.try_recv() => Some(received),
            };
            match received {
                None => {
                    let ping =
                        tokio::time::timeout(Duration::from_secs(5), sqlx::query("SELECT 1").execute(&mut listener));
                    if !matches!(ping.await, Ok(Ok(_))) {
                        tracing::warn!("signal listener's connection does not answer; reconnecting");
                        return true;
                    }
                    self.catch_up(store, position).await;
                    let now = clock.now();
                    if pruned_at.is_none_or(|at| now - at > KEEP_SECONDS / 4) {
                        pruned_at = Some(now);
                        if let Err(error) = store.signals().prune(now - KEEP_SECONDS).await {
                            tracing::debug!(%error, "could not prune old signals");
                        }
                    }
                }
                Some(Ok(Some(notification))) => self.announced(notification.payload(), store, position).await,
                Some(Ok(None)) => {
                    tracing::warn!("signal listener lost its connection; reconnecting");
                    return true;
                }
                Some(Err(error)) => {
                    tracing::warn!(%error, "signal listener failed; reconnecting");
                    return true;
                }
            }
        }
    }

    /// A `NOTIFY` payload: `id origin [payload]` (the payload is left out when too large).
    async fn announced(&self, text: &str, store: &Store, position: &mut Position) {
        let mut parts = text.splitn(3, ' ');
        let (Some(Ok(id)), Some(origin)) = (parts.next().map(str::parse::<i64>), parts.next()) else {
            tracing::debug!("ignored a malformed signal announcement");
            return;
        };
        match parts.next() {
            Some(payload) => self.handle(id, origin, payload, position, Via::Announcement),
            // Too large to announce whole: read it.
            None => match store.signals().after(id - 1, 1).await {
                Ok(rows) => {
                    for row in rows.into_iter().filter(|row| row.id == id) {
                        self.handle(row.id, &row.origin, &row.payload, position, Via::Announcement);
                    }
                }
                Err(error) => tracing::warn!(%error, "could not read an announced signal"),
            },
        }
    }

    /// Reads the outbox from a little below the newest id seen.
    async fn catch_up(&self, store: &Store, position: &mut Position) {
        let mut after = (position.newest - CATCH_UP_SLACK).max(position.floor);
        loop {
            match store.signals().after(after, PAGE).await {
                Ok(rows) => {
                    let full = rows.len() as i64 == PAGE;
                    for row in rows {
                        after = row.id;
                        self.handle(row.id, &row.origin, &row.payload, position, Via::CatchUp);
                    }
                    if !full {
                        return;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "could not read the signal outbox; trying again later");
                    return;
                }
            }
        }
    }

    fn handle(&self, id: i64, origin: &str, payload: &str, position: &mut Position, via: Via) {
        if id <= position.floor || !position.seen.first_time(id) {
            return;
        }
        position.newest = position.newest.max(id);
        if origin == &*self.origin {
            return;
        }
        match serde_json::from_str::<Wire>(payload) {
            Ok(wire) => {
                if via == Via::CatchUp {
                    // Sent while this listener was away: the outbox is what kept it.
                    self.caught_up.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    metrics::counter!("oauth_broker_signals_caught_up_total").increment(1);
                    tracing::debug!(id, "delivered a signal read from the outbox after its announcement was missed");
                }
                self.deliver(wire)
            }
            // A newer instance's signal this version does not know.
            Err(error) => tracing::debug!(%error, id, "skipped a signal this version does not understand"),
        }
    }
}

/// How a signal reached the listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// Its `NOTIFY`.
    Announcement,
    /// A read of the outbox (after a reconnect, or the periodic check).
    CatchUp,
}

async fn connect(options: &PgConnectOptions) -> Result<Option<PgListener>, sqlx::Error> {
    // A pool of one, rebuilt on every reconnection: the listener's connection is never shared.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(options.clone())
        .await?;
    let mut listener = PgListener::connect_with(&pool).await?;
    // Reconnections are ours (with a catch-up); the listener's own would hide the gap.
    listener.eager_reconnect(false);
    listener.ignore_pool_close_event(true);
    listener.listen(CHANNEL).await?;
    Ok(Some(listener))
}
