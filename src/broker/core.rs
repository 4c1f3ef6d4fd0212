//! What the broker core decides with: the database, the sealer, the providers, the clock,
//! outbound HTTP, the event bus and the refresh locks. Every face hands its state's `Core` to
//! the core's functions; nothing in it is a face's (no MCP session, no page, no identity key).

use std::sync::Arc;

use crate::clock::SharedClock;
use crate::config::Config;
use crate::crypto::Sealer;
use crate::events::Events;
use crate::providers::registry::Providers;
use crate::store::Store;

/// What the broker core decides with.
#[derive(Clone)]
pub struct Core {
    /// Resolved settings (public URL, TTLs, …).
    pub config: Arc<Config>,
    /// The database.
    pub store: Store,
    /// Seals and opens secrets at rest.
    pub sealer: Arc<Sealer>,
    /// "Now", injectable for tests.
    pub clock: SharedClock,
    /// Outbound HTTP to providers: no redirects followed, bounded timeouts.
    pub http: reqwest::Client,
    /// Configured providers (and `demo` when enabled).
    pub providers: Arc<Providers>,
    /// "Authorization finished" and "connections changed" signals, for every face to relay.
    pub events: Events,
    /// Per-grant in-process locks so one refresh runs at a time here; the database lease
    /// does the same across instances.
    pub refresh_locks: Arc<super::refresh_locks::RefreshLocks>,
    /// Organizations' own OAuth apps, built into provider settings once per version.
    pub apps: Arc<super::built_apps::BuiltApps>,
}

impl Core {
    pub fn now(&self) -> i64 {
        self.clock.now()
    }
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").field("public_url", &self.config.public_url.as_str()).finish_non_exhaustive()
    }
}
