//! What one MCP session remembers between requests, whichever handler serves them.
//!
//! A parked session has no rmcp service and so no handler
//! ([`crate::mcp::transport::session_transport`]); when it comes back, a new handler serves it.
//! So what the session asked for — the elicitations it started (only it gets their
//! `notifications/elicitation/complete`), the resources it subscribed to, its logging level —
//! lives here, owned by the session and looked up by its id in the session's entry
//! ([`super::table`]), not in a handler. Every handler instance of a session shares its one
//! scope.
//!
//! Notifications that belong to no request are sent through the session itself
//! ([`Outbox`]), not through a handler's rmcp peer, so they reach a parked session's GET stream.

// `logging/setLevel` is deprecated by SEP-2577 (2026-07-28) but is part of 2025-11-25, which
// this server speaks.
#![allow(deprecated)]

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use rmcp::model::{LoggingLevel, ServerNotification};
use tokio_util::sync::CancellationToken;

/// Where a session's notifications go (its GET stream and event log).
pub trait Outbox: Send + Sync {
    /// `false` once the session is closed.
    fn notify(&self, notification: ServerNotification) -> bool;
}

/// What keeps a subscription alive elsewhere while the session holds it: a server behind the
/// broker's subscription over the user's connection (`crate::mcp::gateway::forward::subscribe`), let
/// go when the session unsubscribes or ends.
pub type KeptUpstream = Box<dyn Send + Sync>;

/// A session's `logging/setLevel` choice, shared with extension contexts.
pub type SessionLogLevel = Arc<Mutex<Option<LoggingLevel>>>;

pub struct SessionScope {
    /// `None` for a stateless (2026-07-28) request, which has no session.
    pub session_id: Option<String>,
    /// Elicitation ids this session started.
    pub issued: Mutex<HashSet<String>>,
    /// URIs this session subscribed to (`resources/subscribe`), with what holds each upstream.
    subscriptions: Mutex<HashMap<String, Option<KeptUpstream>>>,
    /// `logging/setLevel`: the least severe level this session wants; `None` = not asked.
    pub log_level: SessionLogLevel,
    /// Set once the relay of notifications for this session started.
    pub listener: OnceLock<()>,
    /// Ends the relay: cancelled when the session ends.
    pub cancel: CancellationToken,
    outbox: Option<Weak<dyn Outbox>>,
}

impl SessionScope {
    /// A live session's scope; its relay ends with `cancel` at the latest.
    pub fn open(session_id: &str, cancel: CancellationToken, outbox: Weak<dyn Outbox>) -> Self {
        Self::new(Some(session_id.to_owned()), cancel, Some(outbox))
    }

    fn new(session_id: Option<String>, cancel: CancellationToken, outbox: Option<Weak<dyn Outbox>>) -> Self {
        Self {
            session_id,
            issued: Mutex::default(),
            subscriptions: Mutex::default(),
            log_level: SessionLogLevel::default(),
            listener: OnceLock::new(),
            cancel,
            outbox,
        }
    }

    /// The scope of one stateless request: nothing outlives it.
    pub fn detached(cancel: CancellationToken) -> Self {
        Self::new(None, cancel, None)
    }

    /// Sends a notification on the session's GET stream; `false` when the session is gone.
    pub fn notify(&self, notification: ServerNotification) -> bool {
        match self.outbox.as_ref().and_then(Weak::upgrade) {
            Some(outbox) => outbox.notify(notification),
            None => false,
        }
    }

    pub fn remember_elicitation(&self, id: &str) {
        self.issued.lock().unwrap_or_else(|p| p.into_inner()).insert(id.to_owned());
    }

    /// Whether this session started elicitation `id`; it is forgotten (completed once).
    pub fn take_elicitation(&self, id: &str) -> bool {
        self.issued.lock().unwrap_or_else(|p| p.into_inner()).remove(id)
    }

    pub fn subscribe(&self, uri: String) {
        self.subscribe_holding(uri, None);
    }

    /// Subscribes to `uri`, keeping `held` until the session unsubscribes or ends (a repeated
    /// subscription replaces what the earlier one held).
    pub fn subscribe_holding(&self, uri: String, held: Option<KeptUpstream>) {
        let replaced = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner()).insert(uri, held);
        // Let go outside the lock: what it holds may act when dropped.
        drop(replaced);
    }

    pub fn unsubscribe(&self, uri: &str) {
        let removed = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner()).remove(uri);
        drop(removed);
    }

    /// Which of `uris` this session subscribed to.
    pub fn subscribed(&self, uris: Vec<String>) -> Vec<String> {
        let subscribed = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
        uris.into_iter().filter(|u| subscribed.contains_key(u)).collect()
    }
}

impl Drop for SessionScope {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
