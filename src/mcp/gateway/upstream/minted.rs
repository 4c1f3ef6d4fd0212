//! The credential of a `token-exchange` server: a short-lived token the broker mints
//! for the calling user, meant for the resource of the token-API service the server is tied to
//! — the same kind of token a user's MCP client presents to that tool server, and the one the
//! exchange at `/token` accepts as `subject_token` (`crate::api::exchange`). The server
//! exchanges it with its own service credentials, so the user's consent for that service and
//! their provider connection gate every call, exactly as when the user calls the tool server
//! directly; the token alone gets a server nothing.
//!
//! A token is bound to its user (`sub`), the calling client (`client_label`, the client's
//! consent key) and the service (`aud`, the service's registered resource). It is minted on
//! the first call and cached until [`RENEW_BEFORE_SECONDS`] before it expires, under a key that
//! names the user, the client, the server and the service's resource, so no two users (nor
//! two clients of one user) ever share one. The service is read on every call: a service
//! removed, or registered again with another resource, stops the next call here.

use std::collections::HashMap;
use std::sync::Mutex;

use secrecy::{ExposeSecret, SecretString};

use crate::clock::Timestamp;
use crate::identity::{AuthenticatedUser, IdentityContext};
use crate::store::{Store, StoreError};

/// How long a minted token is valid: long enough for a slow call's exchange, short enough that
/// a token a server kept is soon worthless.
pub const LIFETIME_SECONDS: i64 = 300;
/// A cached token with less than this left is minted again, so the server's exchange (which may
/// come late in a long call) never meets an expired token.
pub const RENEW_BEFORE_SECONDS: i64 = 120;

/// Why no token could be minted; each says what the operator must fix.
#[derive(Debug, thiserror::Error)]
pub enum MintError {
    #[error("the token-API service this server is tied to was removed; ask the operator to register the server again")]
    ServiceGone,
    #[error(
        "the token-API service this server is tied to has no registered resource; ask the operator to register it with --resource"
    )]
    NoResource,
    #[error("tokens for token-exchange servers are minted for local accounts only (identity mode local)")]
    NotLocal,
    #[error("the token could not be signed")]
    Signing,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Whose token, for which server and audience.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct MintKey {
    user_id: String,
    client: String,
    server_id: String,
    audience: String,
}

struct Minted {
    token: SecretString,
    expires_at: Timestamp,
}

/// The tokens minted on this instance, per (user, client, server, audience).
#[derive(Default)]
pub struct MintedTokens {
    cache: Mutex<HashMap<MintKey, Minted>>,
}

impl std::fmt::Debug for MintedTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MintedTokens([redacted])")
    }
}

impl MintedTokens {
    /// `user`'s token for server `server_id`, tied to service `service_id`: the cached one while
    /// it has time left, else a new one.
    pub async fn token_for(
        &self,
        identity: &IdentityContext,
        store: &Store,
        user: &AuthenticatedUser,
        server_id: &str,
        service_id: &str,
    ) -> Result<SecretString, MintError> {
        if identity.oidc.is_some() {
            return Err(MintError::NotLocal);
        }
        let service = store.services().by_id(service_id).await?.ok_or(MintError::ServiceGone)?;
        let audience = service.resource.as_ref().ok_or(MintError::NoResource)?.to_string();
        let now = identity.now();
        let key = MintKey {
            user_id: user.user_id.clone(),
            client: user.client.key(),
            server_id: server_id.to_owned(),
            audience: audience.clone(),
        };
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(minted) = cache.get(&key)
            && minted.expires_at - now > RENEW_BEFORE_SECONDS
        {
            return Ok(minted.token.clone());
        }
        // Expired entries of anyone go when someone mints: the map stays as large as the users
        // calling within one lifetime.
        cache.retain(|_, minted| minted.expires_at > now);
        let token = identity
            .keys
            .issue_for_audience(
                &user.subject,
                user.display_name.as_deref(),
                Some(&key.client),
                &audience,
                now,
                LIFETIME_SECONDS,
            )
            .map_err(|_| MintError::Signing)?;
        let token = SecretString::from(token);
        cache.insert(key, Minted { token: token.clone(), expires_at: now + LIFETIME_SECONDS });
        Ok(token)
    }

    /// Drops `user`'s tokens for `server_id` (the server refused one): the next call mints anew.
    pub fn forget(&self, user: &AuthenticatedUser, server_id: &str) {
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|key, _| !(key.user_id == user.user_id && key.server_id == server_id));
    }

    /// The token cached for user `user_id` and `server_id`, if any (tests present it elsewhere).
    pub fn cached(&self, user_id: &str, server_id: &str) -> Option<String> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .iter()
            .find(|(key, _)| key.user_id == user_id && key.server_id == server_id)
            .map(|(_, minted)| minted.token.expose_secret().to_owned())
    }
}
