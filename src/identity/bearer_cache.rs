//! Verified bearer tokens, remembered until they expire.
//!
//! The same token arrives thousands of times; verifying its Ed25519 signature and reading its
//! user and its authorization every time was most of what a tool call cost. A verified token's
//! answer (the [`AuthenticatedUser`]) is kept under the SHA-256 of the audience and the token
//! — never the token itself — until the token expires.
//!
//! What could make the answer wrong later — the user disabled or deleted, the token's
//! authorization revoked — is written to the database by this server, another instance or the
//! admin CLI in another process. Each answer is kept under its user's generation
//! ([`crate::store::generations`]), which a write of this process about that user (or about no
//! one in particular, such as a revoked authorization) moves at once, and a write of another
//! process within the watcher's interval (triggers move the `auth_epoch` counter, migration
//! 0012, which the watcher reads): no database call per request. An answer is only kept if the
//! user's generation had not moved since before it was worked out (see [`BearerCache::insert`]),
//! so a change racing a verification cannot be cached over.

use sha2::{Digest, Sha256};

use super::authenticated_user::AuthenticatedUser;
use crate::clock::Timestamp;
use crate::store::generation_cache::GenerationCache;

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

#[derive(Debug)]
pub struct BearerCache {
    entries: GenerationCache<TokenKey, Entry>,
}

#[derive(Clone)]
struct Entry {
    user: AuthenticatedUser,
    /// The token is refused from this instant on (its `exp` plus the verifier's leeway).
    refused_from: Timestamp,
}

impl Default for BearerCache {
    fn default() -> Self {
        Self { entries: GenerationCache::new(CAPACITY) }
    }
}

impl BearerCache {
    /// The user of a token verified before, if it has not expired at `now` and its user's
    /// generation is still the one it was kept under (`generation_of` answers it; `None`: not
    /// trusted). An entry that fails either is dropped.
    pub fn get(
        &self,
        key: &TokenKey,
        now: Timestamp,
        generation_of: impl FnOnce(&str) -> Option<u64>,
    ) -> Option<AuthenticatedUser> {
        let entry =
            self.entries.get_if(key, |entry| generation_of(&entry.user.user_id), |entry| now < entry.refused_from)?;
        Some(entry.user)
    }

    /// Remembers a token verified after the step `before` was taken, under its user's
    /// `generation` read after the verification — unless that is later than `before` (the
    /// user, or everything, moved meanwhile: the answer may rest on what has changed).
    pub fn insert(
        &self,
        before: u64,
        generation: Option<u64>,
        key: TokenKey,
        user: AuthenticatedUser,
        refused_from: Timestamp,
    ) {
        self.entries.insert(before, generation, key, Entry { user, refused_from });
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
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
        let key = TokenKey::new("t1", "https://broker.example/mcp");
        cache.insert(7, Some(7), key, user("u1"), 1_000);
        let at = |_: &str| Some(7);
        assert_eq!(cache.get(&key, 999, at).map(|u| u.user_id), Some("u1".into()));
        assert!(cache.get(&TokenKey::new("t1", "https://tools.example/mcp"), 999, at).is_none());
        assert!(cache.get(&TokenKey::new("t2", "https://broker.example/mcp"), 999, at).is_none());
        assert!(cache.get(&key, 1_000, at).is_none(), "expired");
        assert!(cache.is_empty(), "an expired token is forgotten");
    }

    #[test]
    fn a_moved_user_generation_drops_the_token_and_an_answer_from_before_it_moved_is_not_kept() {
        let cache = BearerCache::default();
        let (k1, k2) = (TokenKey::new("t1", "aud"), TokenKey::new("t2", "aud"));
        cache.insert(1, Some(1), k1, user("u1"), 1_000);
        cache.insert(1, Some(1), k2, user("u2"), 1_000);
        let moved_u1 = |id: &str| Some(if id == "u1" { 2 } else { 1 });
        assert!(cache.get(&k1, 0, moved_u1).is_none(), "u1's generation moved");
        assert!(cache.get(&k2, 0, moved_u1).is_some(), "u2's did not");
        assert!(cache.get(&k2, 0, |_| None).is_none(), "nothing is used while untrusted");
        assert!(cache.get(&k2, 0, moved_u1).is_some(), "but it is kept for when trust returns");
        // Verified after step 1, but u1's generation moved to 2 before it was stored: not kept.
        cache.insert(1, Some(2), k1, user("u1"), 1_000);
        assert!(cache.get(&k1, 0, moved_u1).is_none());
        cache.insert(2, Some(2), k1, user("u1"), 1_000);
        assert!(cache.get(&k1, 0, moved_u1).is_some());
    }

    #[test]
    fn nothing_is_kept_while_untrusted() {
        let cache = BearerCache::default();
        cache.insert(0, None, TokenKey::new("t1", "aud"), user("u1"), 1_000);
        assert!(cache.is_empty());
    }
}
