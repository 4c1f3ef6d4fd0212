//! What handlers share, in two layers.
//!
//! [`Core`] is what the broker core ([`crate::broker`]) needs to decide: the database, the
//! sealer, the providers, the clock, outbound HTTP and the event bus. [`AppState`] adds what the
//! identity layer and every face need (the broker's own signing keys, the OIDC context) and
//! dereferences to its `Core`, so a face hands `&state` straight to a core function. The MCP
//! face keeps its own sessions, prompts and extensions in [`crate::mcp::McpState`], so nothing
//! here knows MCP. `AppState` is one `Arc`: axum clones the state for every request and every
//! middleware, and cloning the fields one by one (a dozen reference counts, two cancellation
//! tokens that take a lock each) was ~5% of a tool call's CPU (issue 11).

use std::sync::Arc;

use crate::clock::SharedClock;
use crate::config::Config;
use crate::crypto::Sealer;
use crate::events::Events;
use crate::identity::jwt::TokenKeys;
use crate::oauth::providers::Providers;
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
    pub refresh_locks: Arc<crate::broker::refresh_locks::RefreshLocks>,
}

impl Core {
    pub fn now(&self) -> i64 {
        self.clock.now()
    }
}

/// What every face's handler shares: the core, plus face-only parts ([`AppStateFields`]),
/// behind one reference count.
#[derive(Clone)]
pub struct AppState(Arc<AppStateFields>);

impl AppState {
    pub fn new(fields: AppStateFields) -> Self {
        Self(Arc::new(fields))
    }

    /// See [`crate::app::AppBuilder::fixed_identity_for_tests`]; set while the app is built.
    pub fn set_fixed_identity(&mut self, username: String) {
        Arc::make_mut(&mut self.0).fixed_identity = Some(username);
    }
}

impl std::ops::Deref for AppState {
    type Target = AppStateFields;

    fn deref(&self) -> &AppStateFields {
        &self.0
    }
}

/// The core, plus what only the faces and the identity layer need.
#[derive(Clone)]
pub struct AppStateFields {
    pub core: Core,
    /// The broker's own JWT keys (issues and verifies bearer tokens for /mcp).
    pub keys: Arc<TokenKeys>,
    /// `[identity] mode = "oidc"` only: the external issuer's metadata and keys, which verify
    /// bearer tokens and browser sign-ins instead of the local accounts.
    pub oidc: Option<Arc<crate::identity::oidc::OidcContext>>,
    /// The demo provider's client secret, shared by the provider and the broker's `demo` entry.
    pub demo_client_secret: Option<secrecy::SecretString>,
    /// Cancelled when the server starts to stop (SIGTERM): standalone SSE streams end with a
    /// `retry:` hint and waits end early with a "call again" answer, while requests already
    /// running finish. Also cancelled with `shutdown`.
    pub draining: tokio_util::sync::CancellationToken,
    /// Cancelled at shutdown (after the grace period): ends every stream, long poll and
    /// waiting tool call that is still open.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Test harnesses only (never from configuration): the user for /mcp requests that carry
    /// no bearer token. See [`crate::app::AppBuilder::fixed_identity_for_tests`].
    pub fixed_identity: Option<String>,
    /// Verified bearer tokens until they expire, dropped when their user, their authorization
    /// or a consent changes — here at once, in another process within the watcher's interval
    /// ([`crate::identity::bearer_cache`]).
    pub bearer_cache: Arc<crate::identity::bearer_cache::BearerCache>,
}

impl std::ops::Deref for AppStateFields {
    type Target = Core;

    fn deref(&self) -> &Core {
        &self.core
    }
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").field("public_url", &self.config.public_url.as_str()).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").field("public_url", &self.config.public_url.as_str()).finish_non_exhaustive()
    }
}
