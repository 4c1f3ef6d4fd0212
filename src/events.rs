//! In-process signal that an authorization reached a final state.
//!
//! The browser flow (web pages) publishes; MCP sessions listen, to send
//! `notifications/elicitation/complete` and to wake a `connect_account` call that is waiting.
//! It is a signal, not a queue: the database row is the truth and every listener re-reads it,
//! so a missed signal costs only a notification (which the spec makes optional) and a retried
//! tool call still succeeds from the stored grant.

use tokio::sync::broadcast;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationFinished {
    pub authorization_id: String,
    pub user_id: String,
    pub provider: String,
    /// `completed`, `declined` or `failed`.
    pub status: String,
}

/// Changes MCP sessions relay as notifications.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// The prompt catalogue changed (`notifications/prompts/list_changed` to every session).
    PromptsChanged,
    /// Resources of one user changed (`notifications/resources/updated` to that user's
    /// sessions subscribed to one of these URIs).
    ResourcesChanged { user_id: String, uris: Vec<String> },
}

#[derive(Debug, Clone)]
pub struct Events {
    sender: broadcast::Sender<AuthorizationFinished>,
    signals: broadcast::Sender<Signal>,
}

impl Default for Events {
    fn default() -> Self {
        Self::new()
    }
}

impl Events {
    pub fn new() -> Self {
        let (sender, _) = broadcast::channel(1024);
        let (signals, _) = broadcast::channel(1024);
        Self { sender, signals }
    }

    pub fn publish(&self, event: AuthorizationFinished) {
        // No receiver is fine: nobody is waiting.
        let _ = self.sender.send(event);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<AuthorizationFinished> {
        self.sender.subscribe()
    }

    pub fn signal(&self, signal: Signal) {
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
}
