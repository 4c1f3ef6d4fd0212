//! What every handler shares. Cheap to clone (everything is behind `Arc` or is a handle).

use std::sync::Arc;

use crate::clock::SharedClock;
use crate::config::Config;
use crate::crypto::Sealer;
use crate::events::Events;
use crate::identity::jwt::TokenKeys;
use crate::oauth::providers::Providers;
use crate::store::Store;

#[derive(Clone)]
pub struct AppState {
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
    /// The broker's own JWT keys (issues and verifies bearer tokens for /mcp).
    pub keys: Arc<TokenKeys>,
    /// `[identity] mode = "oidc"` only: the external issuer's metadata and keys, which verify
    /// bearer tokens and browser sign-ins instead of the local accounts.
    pub oidc: Option<Arc<crate::identity::oidc::OidcContext>>,
    /// "Authorization finished" signals for MCP sessions.
    pub events: Events,
    /// Per-grant in-process locks so one refresh runs at a time here; the database lease
    /// does the same across instances.
    pub refresh_locks: Arc<crate::oauth::tokens::RefreshLocks>,
    /// Live MCP sessions by (user, session id), to deliver `notifications/elicitation/complete`.
    pub sessions: Arc<crate::mcp::sessions::SessionRegistry>,
    /// The demo provider's client secret, shared by the provider and the broker's `demo` entry.
    pub demo_client_secret: Option<secrecy::SecretString>,
    /// Cancelled at shutdown: ends SSE streams and waiting tool calls.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Tools, prompts and resources added through [`crate::app::AppBuilder::extension`].
    pub extensions: crate::mcp::extension::Extensions,
    /// The prompt catalogue (built-in, operator files, extensions).
    pub prompts: Arc<crate::mcp::prompts::PromptCatalogue>,
    /// Test harnesses only (never from configuration): the user for /mcp requests that carry
    /// no bearer token. See [`crate::app::AppBuilder::fixed_identity_for_tests`].
    pub fixed_identity: Option<String>,
}

impl AppState {
    pub fn now(&self) -> i64 {
        self.clock.now()
    }
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").field("public_url", &self.config.public_url.as_str()).finish_non_exhaustive()
    }
}
