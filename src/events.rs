//! Signals that something happened: an authorization reached a final state, a user's
//! connections changed, the prompt catalogue changed.
//!
//! The browser flow and the core publish; MCP sessions, a waiting `connect_account` and the
//! token API's waiters listen, to send `notifications/elicitation/complete` and
//! `notifications/resources/updated` or to wake up. It is a signal, not a queue: the database
//! row is the truth and every listener re-reads it, so a missed signal costs only a
//! notification (which the spec makes optional) and a retried tool call still succeeds from the
//! stored grant.
//!
//! Within a process the signals are a tokio broadcast. On PostgreSQL they also travel to every
//! other instance on the same database ([`relay`]): each is appended to an outbox table, which
//! a trigger announces with `LISTEN/NOTIFY`; a listener that lost its connection reads what it
//! missed from the table when it is back. A signal is delivered here at once, and to the other
//! instances through the database, never to its sender twice. What travels is JSON with ids
//! only, never a secret; a signal another (newer) instance sends that this one does not know
//! is skipped, so a rolling deploy may add variants.

mod relay;
pub mod webhooks;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc, oneshot};

pub use relay::LISTENER_APPLICATION_NAME;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorizationFinished {
    pub authorization_id: String,
    pub user_id: String,
    pub provider: String,
    /// `completed`, `declined` or `failed`.
    pub status: String,
}

/// Changes MCP sessions relay as notifications.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Signal {
    /// The prompt catalogue changed (`notifications/prompts/list_changed` to every session).
    /// Prompt files are read by each process from its own disk, and each process's watcher
    /// sends this for its own catalogue, so it stays in the process (see
    /// [`Signal::crosses_instances`]).
    PromptsChanged,
    /// The tools of the servers behind the broker changed (`notifications/tools/list_changed`
    /// to every session). Each process keeps its own lists and sends this for its own, so it
    /// stays in the process, as [`Signal::PromptsChanged`] does.
    ToolsChanged,
    /// The resources or templates of the servers behind the broker changed
    /// (`notifications/resources/list_changed` to every session); kept in the process, as
    /// [`Signal::ToolsChanged`] is.
    ResourceListChanged,
    /// Resources of one user changed (`notifications/resources/updated` to that user's
    /// sessions subscribed to one of these URIs).
    ResourcesChanged { user_id: String, uris: Vec<String> },
    /// A server behind the broker says one of its resources changed, over one user's connection
    /// of this process (`notifications/resources/updated` to that user's sessions subscribed to
    /// these gateway URIs). It stays in the process: the sessions that subscribed through this
    /// connection are here, and another instance hears its own connections.
    ServerResourcesUpdated { user_id: String, uris: Vec<String> },
    /// An instance read one of a server's lists, found it changed and stored it
    /// (`store::gateway::lists`): every instance reads it back, and its sessions hear the
    /// matching `list_changed` if their list changed too. Ids only; the list is in the table.
    GatewayListsStored { server_id: String },
    /// The resources a server that acts as the user lists to `user_id` (to every user if
    /// `None`) may have changed (`notifications/resources/list_changed` to their sessions and
    /// listens, on every instance). Each user's resources of such a server are read when their
    /// client lists (`mcp::gateway::own_resources`). `None`: the server said so over one user's
    /// connection, and may have changed more users' than that one, so everyone is told and
    /// each lists their own again. `Some`: that user's lists left the server out for a while,
    /// which has ended.
    GatewayResourcesChanged { server_id: String, user_id: Option<String> },
}

impl Signal {
    /// Whether other instances on the same database must hear of it. Every signal does unless
    /// it concerns this process alone.
    pub fn crosses_instances(&self) -> bool {
        !matches!(
            self,
            Signal::PromptsChanged
                | Signal::ToolsChanged
                | Signal::ResourceListChanged
                | Signal::ServerResourcesUpdated { .. }
        )
    }
}

/// What travels between instances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
enum Wire {
    AuthorizationFinished(AuthorizationFinished),
    Signal(Signal),
}

#[derive(Debug, Clone)]
pub struct Events {
    sender: broadcast::Sender<AuthorizationFinished>,
    signals: broadcast::Sender<Signal>,
    /// This process, as the outbox's `origin`: a random id.
    origin: Arc<str>,
    /// PostgreSQL: signals for the other instances, to the outbox writer.
    outbox: Option<mpsc::UnboundedSender<relay::Outbound>>,
    /// Other instances' signals this process delivered from an outbox read rather than from
    /// their announcement (they were sent while its listener was away).
    caught_up: Arc<AtomicU64>,
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
        events.outbox = Some(relay::start_writer(store, clock, events.origin.clone()));
        events
    }

    /// Waits until every signal published so far is in the outbox (committed, and so announced
    /// to the other instances), at most [`FLUSH_WAIT`]. A process that exits right after
    /// publishing (the admin CLI) calls it first, or its signals die with it.
    pub async fn flush(&self) {
        let Some(outbox) = &self.outbox else { return };
        let (done, written) = oneshot::channel();
        if outbox.send(relay::Outbound::Flush(done)).is_err() {
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
            let _ = outbox.send(relay::Outbound::Signal(Wire::AuthorizationFinished(event.clone())));
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
            let _ = outbox.send(relay::Outbound::Signal(Wire::Signal(signal.clone())));
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
    fn deliver(&self, wire: Wire) {
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

    #[test]
    fn signals_travel_as_json_with_ids_only() {
        let finished = Wire::AuthorizationFinished(AuthorizationFinished {
            authorization_id: "auth-1".into(),
            user_id: "user-1".into(),
            provider: "github".into(),
            status: "completed".into(),
        });
        let json = serde_json::to_string(&finished).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"authorization_finished","data":{"authorization_id":"auth-1","user_id":"user-1","provider":"github","status":"completed"}}"#
        );
        assert_eq!(serde_json::from_str::<Wire>(&json).unwrap(), finished);
        let changed = Wire::Signal(Signal::ResourcesChanged {
            user_id: "user-1".into(),
            uris: vec!["broker://connections".into()],
        });
        let json = serde_json::to_string(&changed).unwrap();
        assert_eq!(serde_json::from_str::<Wire>(&json).unwrap(), changed);
    }

    #[test]
    fn a_signal_this_version_does_not_know_is_refused_not_misread() {
        assert!(serde_json::from_str::<Wire>(r#"{"kind":"signal","data":{"SomethingNew":{"id":"x"}}}"#).is_err());
        assert!(serde_json::from_str::<Wire>(r#"{"kind":"brand_new","data":{}}"#).is_err());
    }

    #[test]
    fn the_prompt_catalogue_stays_in_its_process_and_resource_changes_travel() {
        assert!(!Signal::PromptsChanged.crosses_instances());
        assert!(Signal::ResourcesChanged { user_id: "u".into(), uris: vec![] }.crosses_instances());
        // A user's own resources of a server may be listed on any instance.
        assert!(Signal::GatewayResourcesChanged { server_id: "s".into(), user_id: None }.crosses_instances());
    }

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
