//! What handlers share: [`AppState`], the core ([`crate::broker::Core`]: what the broker needs
//! to decide) with the identity layer's context ([`IdentityContext`]: the broker's own signing
//! keys, the OIDC issuer, the verified-token cache) and what only the faces need. The
//! core is one explicit field, `state.core`: a face hands `&state.core` to a core function and
//! reads its identity context through `state.identity`. The MCP face keeps its own sessions, prompts and
//! extensions in `crate::mcp::state::McpState`, so nothing here knows MCP. `AppState` is one `Arc`:
//! axum clones the state for every request and every middleware, and cloning the fields one by
//! one (a dozen reference counts, two cancellation tokens that take a lock each) was ~5% of a
//! tool call's CPU.

use std::sync::Arc;

use crate::broker::Core;
use crate::identity::IdentityContext;

/// What every face's handler shares: the core, plus face-only parts ([`AppStateFields`]),
/// behind one reference count.
#[derive(Clone)]
pub struct AppState(Arc<AppStateFields>);

impl AppState {
    pub fn new(fields: AppStateFields) -> Self {
        Self(Arc::new(fields))
    }

    /// See `crate::app::AppBuilder::fixed_identity_for_tests`; set while the app is built.
    pub fn set_fixed_identity(&mut self, username: String) {
        Arc::make_mut(&mut self.0).identity.fixed_identity = Some(username);
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
    /// What bearer tokens and browser sign-ins are checked with.
    pub identity: IdentityContext,
    /// The demo provider's client secret, shared by the provider and the broker's `demo` entry.
    pub demo_client_secret: Option<secrecy::SecretString>,
    /// Cancelled when the server starts to stop (SIGTERM): standalone SSE streams end with a
    /// `retry:` hint and waits end early with a "call again" answer, while requests already
    /// running finish. Also cancelled with `shutdown`.
    pub draining: tokio_util::sync::CancellationToken,
    /// Cancelled at shutdown (after the grace period): ends every stream, long poll and
    /// waiting tool call that is still open.
    pub shutdown: tokio_util::sync::CancellationToken,
}

impl AsRef<IdentityContext> for AppState {
    fn as_ref(&self) -> &IdentityContext {
        &self.identity
    }
}

impl crate::net::TrustedProxies for AppState {
    fn trusted_proxies(&self) -> &[ipnet::IpNet] {
        &self.core.config.trusted_proxies
    }
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").field("public_url", &self.core.config.public_url.as_str()).finish_non_exhaustive()
    }
}
