//! [`Events`]: the signals of this process, a tokio broadcast each, which the core publishes on
//! and the faces listen to; on PostgreSQL each is also handed to the outbox writer for the other
//! instances ([`super::outbox_writer`]), whose signals come back through
//! [`super::outbox_listener`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot};

use super::outbox_writer::{self, Outbound};
use super::signal::{AuthorizationFinished, Signal, Wire};

#[derive(Debug, Clone)]
pub struct Events {
    sender: broadcast::Sender<AuthorizationFinished>,
    signals: broadcast::Sender<Signal>,
    /// This process, as the outbox's `origin`: a random id.
    pub(super) origin: Arc<str>,
    /// PostgreSQL: signals for the other instances, to the outbox writer.
    outbox: Option<mpsc::UnboundedSender<Outbound>>,
    /// Other instances' signals this process delivered from an outbox read rather than from
    /// their announcement (they were sent while its listener was away).
    pub(super) caught_up: Arc<AtomicU64>,
}

/// How long [`Events::flush`] waits for the outbox writer.
const FLUSH_WAIT: Duration = Duration::from_secs(10);

impl Default for Events {
    fn default() -> Self {
        Self::new()
    }
}

impl Events {
    /// Signals within this process only.
    pub fn new() -> Self {
        let (sender, _) = broadcast::channel(1024);
        let (signals, _) = broadcast::channel(1024);
        Self {
            sender,
            signals,
            origin: uuid::Uuid::new_v4().simple().to_string().into(),
            outbox: None,
            caught_up: Arc::default(),
        }
    }

    /// Signals within this process, and to every other instance on `store` (PostgreSQL) through
    /// its outbox. Receiving theirs is [`Events::listen_to_other_instances`].
    pub fn sending_to_other_instances(store: crate::store::Store, clock: crate::clock::SharedClock) -> Self {
        let mut events = Self::new();
        events.outbox = Some(outbox_writer::start_writer(store, clock, events.origin.clone()));
        events
    }

    /// Waits until every signal published so far is in the outbox (committed, and so announced
    /// to the other instances), at most [`FLUSH_WAIT`]. A process that exits right after
    /// publishing (the admin CLI) calls it first, or its signals die with it.
    pub async fn flush(&self) {
        let Some(outbox) = &self.outbox else { return };
        let (done, written) = oneshot::channel();
        if outbox.send(Outbound::Flush(done)).is_err() {
            return;
        }
        if tokio::time::timeout(FLUSH_WAIT, written).await.is_err() {
            tracing::warn!("signals for the other instances were not all written before exit");
        }
    }

    /// How many of the other instances' signals this process delivered after reading them
    /// from the outbox (its listener was away when they were announced).
    pub fn signals_caught_up(&self) -> u64 {
        self.caught_up.load(Ordering::Relaxed)
    }

    /// This process's id as a sender of signals.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub fn publish(&self, event: AuthorizationFinished) {
        if let Some(outbox) = &self.outbox {
            let _ = outbox.send(Outbound::Signal(Wire::AuthorizationFinished(event.clone())));
        }
        // No receiver is fine: nobody is waiting.
        let _ = self.sender.send(event);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<AuthorizationFinished> {
        self.sender.subscribe()
    }

    pub fn signal(&self, signal: Signal) {
        if let Some(outbox) = &self.outbox
            && signal.crosses_instances()
        {
            let _ = outbox.send(Outbound::Signal(Wire::Signal(signal.clone())));
        }
        let _ = self.signals.send(signal);
    }

    pub fn subscribe_signals(&self) -> broadcast::Receiver<Signal> {
        self.signals.subscribe()
    }

    /// A user's connection to `provider` changed: its resources did.
    pub fn connections_changed(&self, user_id: &str, provider: &str) {
        self.signal(Signal::ResourcesChanged {
            user_id: user_id.to_owned(),
            // `broker://providers` also shows whether this user is connected.
            uris: vec![
                "broker://connections".to_owned(),
                format!("broker://connections/{provider}"),
                "broker://providers".to_owned(),
            ],
        });
    }

    /// Delivers a signal that came from another instance to this process's listeners only.
    pub(super) fn deliver(&self, wire: Wire) {
        match wire {
            Wire::AuthorizationFinished(event) => {
                let _ = self.sender.send(event);
            }
            Wire::Signal(signal) => {
                let _ = self.signals.send(signal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_a_database_signals_stay_in_the_process() {
        let events = Events::new();
        let mut finished = events.subscribe();
        let mut signals = events.subscribe_signals();
        events.connections_changed("user-1", "demo");
        assert!(
            matches!(signals.recv().await.unwrap(), Signal::ResourcesChanged { user_id, .. } if user_id == "user-1")
        );
        events.deliver(Wire::AuthorizationFinished(AuthorizationFinished {
            authorization_id: "a".into(),
            user_id: "u".into(),
            provider: "demo".into(),
            status: "declined".into(),
        }));
        assert_eq!(finished.recv().await.unwrap().status, "declined");
    }
}
