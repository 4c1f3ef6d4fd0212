//! What identity checks read: the settings, the database, the clock and the sealer (the same
//! the core has), the broker's own signing keys, the OIDC issuer's context, and the cache of
//! verified bearer tokens. The faces' state holds one and hands it in (`AsRef`), so identity
//! imports no face's state.

use std::sync::Arc;

use super::bearer_cache::BearerCache;
use super::jwt::TokenKeys;
use super::oidc::oidc_context::OidcContext;
use crate::clock::SharedClock;
use crate::config::Config;
use crate::crypto::Sealer;
use crate::store::Store;

#[derive(Clone)]
pub struct IdentityContext {
    pub config: Arc<Config>,
    pub store: Store,
    pub clock: SharedClock,
    pub sealer: Arc<Sealer>,
    /// The broker's own JWT keys (issues and verifies bearer tokens for /mcp).
    pub keys: Arc<TokenKeys>,
    /// `[identity] mode = "oidc"` only: the external issuer's metadata and keys, which verify
    /// bearer tokens and browser sign-ins instead of the local accounts.
    pub oidc: Option<Arc<OidcContext>>,
    /// Verified bearer tokens until they expire, dropped when their user, their authorization
    /// or a consent changes — here at once, in another process within the watcher's interval
    /// ([`super::bearer_cache`]).
    pub bearer_cache: Arc<BearerCache>,
    /// Test harnesses only (never from configuration): the user for /mcp requests that carry
    /// no bearer token. See `crate::app::AppBuilder::fixed_identity_for_tests`.
    pub fixed_identity: Option<String>,
}

impl IdentityContext {
    pub fn now(&self) -> i64 {
        self.clock.now()
    }
}
