//! Verified bearer tokens, remembered until they expire (issue 11).
//!
//! The same token arrives thousands of times; verifying its Ed25519 signature and reading its
//! user and its authorization every time was most of what a tool call cost. A verified token's
//! answer (the [`AuthenticatedUser`]) is kept under the SHA-256 of the audience and the token
//! — never the token itself — until the token expires.
//!
//! What could make the answer wrong later — the user disabled or deleted, the token's
//! authorization revoked — is written to the database by this server, another instance or the
//! admin CLI in another process. Each answer is kept under the store's generation
//! ([`crate::store::freshness`]), which every write of this process moves at once and a write
//! of another process moves within the watcher's interval (triggers move the `auth_epoch`
//! counter, migration 0012, which the watcher reads): no database call per request. When it
//! moved, everything cached is dropped. An answer is only kept if the generation had not moved
//! before it was worked out (see [`BearerCache::insert`]), so a change racing a verification
//! cannot be cached over.

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::AuthenticatedUser;
use crate::clock::Timestamp;

/// At most this many tokens are remembered; a full cache starts over (a flood of distinct
/// valid tokens is an operator's own doing, and each is still verified once).
pub const CAPACITY: usize = 100_000;

/// SHA-256 of `audience`, a newline and the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenKey([u8; 32]);

impl TokenKey {
    pub fn new(token: &str, audience: &str) -> Self {
        let mut hash = Sha256::new();
        hash.update(audience.as_bytes());
        hash.update(b"\n");
        hash.update(token.as_bytes());
        Self(hash.finalize().into())
    }
}

#[derive(Default)]
pub struct BearerCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The newest generation seen; `None` before the first.
    epoch: Option<u64>,
    entries: HashMap<TokenKey, Entry>,
}

struct Entry {
    user: AuthenticatedUser,
    /// The token is refused from this instant on (its `exp` plus the verifier's leeway).
    refused_from: Timestamp,
}

impl std::fmt::Debug for BearerCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerCache").field("entries", &self.len()).finish()
    }
}

impl BearerCache {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The generation a request just saw: if it is newer, everything cached goes. Generations
    /// only grow; a request that saw an older one changes nothing (and finds nothing).
    pub fn observe(&self, epoch: u64) {
        let mut inner = self.inner();
        if inner.epoch.is_none_or(|seen| epoch > seen) {
            inner.entries.clear();
            inner.epoch = Some(epoch);
        }
    }

    /// The user of a token verified before, if it has not expired at `now` and the request saw
    /// the newest generation (`epoch`).
    pub fn get(&self, epoch: u64, key: &TokenKey, now: Timestamp) -> Option<AuthenticatedUser> {
        let mut inner = self.inner();
        if inner.epoch != Some(epoch) {
            return None;
        }
        match inner.entries.get(key) {
            Some(entry) if now < entry.refused_from => Some(entry.user.clone()),
            Some(_) => {
                inner.entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Remembers a token verified after reading the counter as `epoch`; kept only if the
    /// counter has not moved since (otherwise the answer may rest on what has changed).
    pub fn insert(&self, epoch: u64, key: TokenKey, user: AuthenticatedUser, refused_from: Timestamp) {
        let mut inner = self.inner();
        if inner.epoch != Some(epoch) {
            return;
        }
        if inner.entries.len() >= CAPACITY {
            inner.entries.clear();
        }
        inner.entries.insert(key, Entry { user, refused_from });
    }

    pub fn len(&self) -> usize {
        self.inner().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::ClientIdentity;

    fn user(id: &str) -> AuthenticatedUser {
        AuthenticatedUser {
            user_id: id.into(),
            issuer: "https://broker.example".into(),
            subject: id.into(),
            display_name: None,
            client: ClientIdentity::IssuedToken(None),
        }
    }

    #[test]
    fn a_token_is_remembered_until_it_expires_and_only_for_its_audience() {
        let cache = BearerCache::default();
        cache.observe(7);
        let key = TokenKey::new("t1", "https://broker.example/mcp");
        cache.insert(7, key, user("u1"), 1_000);
        assert_eq!(cache.get(7, &key, 999).map(|u| u.user_id), Some("u1".into()));
        assert!(cache.get(7, &TokenKey::new("t1", "https://tools.example/mcp"), 999).is_none());
        assert!(cache.get(7, &TokenKey::new("t2", "https://broker.example/mcp"), 999).is_none());
        assert!(cache.get(7, &key, 1_000).is_none(), "expired");
        assert!(cache.is_empty(), "an expired token is forgotten");
    }

    #[test]
    fn a_moved_counter_drops_everything_and_an_answer_from_before_it_moved_is_not_kept() {
        let cache = BearerCache::default();
        cache.observe(1);
        let key = TokenKey::new("t1", "aud");
        cache.insert(1, key, user("u1"), 1_000);
        cache.observe(2);
        assert!(cache.get(2, &key, 0).is_none(), "dropped when the counter moved");
        // Verified while the counter read 1, stored after another request saw 2: not kept.
        cache.insert(1, key, user("u1"), 1_000);
        assert!(cache.get(2, &key, 0).is_none());
        cache.insert(2, key, user("u1"), 1_000);
        assert!(cache.get(2, &key, 0).is_some());
        // A request that saw 1 (it started before the move) neither goes back nor finds it.
        cache.observe(1);
        assert!(cache.get(1, &key, 0).is_none());
        assert!(cache.get(2, &key, 0).is_some(), "the newer generation stays");
    }

    #[test]
    fn nothing_is_kept_before_the_counter_was_read() {
        let cache = BearerCache::default();
        cache.insert(0, TokenKey::new("t1", "aud"), user("u1"), 1_000);
        assert!(cache.is_empty());
    }
}
