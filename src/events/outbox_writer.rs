//! This instance's signals for the others on one PostgreSQL database: appended to the outbox
//! table in the order they were published, off the publisher's path; migration 0010's trigger
//! announces each row, and [`super::outbox_listener`] on every other instance delivers it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::signal::Wire;
use crate::clock::SharedClock;
use crate::store::Store;

/// The first wait before a signal is written again after the database was unavailable,
/// doubling for each of the three tries.
const RETRY_WAIT: Duration = Duration::from_millis(200);

/// What the outbox writer is asked to do, in order.
pub(super) enum Outbound {
    Signal(Wire),
    /// Answer once everything before it is written ([`super::Events::flush`]).
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// Appends what this process sends to the outbox, in order, off the caller's path (publishing
/// is synchronous and must not wait for the database). A signal that cannot be written after a
/// few tries is dropped with a warning: it was only a signal, the row it is about is the truth.
pub(super) fn start_writer(store: Store, clock: SharedClock, origin: Arc<str>) -> mpsc::UnboundedSender<Outbound> {
    let (sender, mut receiver) = mpsc::unbounded_channel::<Outbound>();
    tokio::spawn(async move {
        while let Some(outbound) = receiver.recv().await {
            let wire = match outbound {
                Outbound::Signal(wire) => wire,
                Outbound::Flush(done) => {
                    let _ = done.send(());
                    continue;
                }
            };
            let payload = match serde_json::to_string(&wire) {
                Ok(payload) => payload,
                Err(error) => {
                    tracing::warn!(%error, "could not encode a signal for the other instances");
                    continue;
                }
            };
            let mut wait = RETRY_WAIT;
            for attempt in 1..=3 {
                match store.signals().append(&origin, &payload, clock.now()).await {
                    Ok(_) => break,
                    Err(error) if attempt < 3 && error.is_unavailable() => {
                        tokio::time::sleep(wait).await;
                        wait *= 2;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "could not send a signal to the other instances; they re-read the database on their next look");
                        break;
                    }
                }
            }
        }
    });
    sender
}
