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

#[derive(Debug, Clone)]
pub struct Events {
    sender: broadcast::Sender<AuthorizationFinished>,
}

impl Default for Events {
    fn default() -> Self {
        Self::new()
    }
}

impl Events {
    pub fn new() -> Self {
        let (sender, _) = broadcast::channel(1024);
        Self { sender }
    }

    pub fn publish(&self, event: AuthorizationFinished) {
        // No receiver is fine: nobody is waiting.
        let _ = self.sender.send(event);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<AuthorizationFinished> {
        self.sender.subscribe()
    }
}
