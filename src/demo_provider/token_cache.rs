//! The demo provider's live access tokens, kept after their first check.
//!
//! The broker presents the same access token on every `provider_request`, and looking it up
//! was a database round trip per API call — the demo provider's own time, which a real
//! provider spends on its own machines, counted against the broker in the benchmark. A token
//! found live (an access token, not revoked) is kept by its SHA-256 hash under the store's
//! generation ([`crate::store::generations`]) and used only while the generation has not moved:
//! - a revocation (RFC 7009 `/revoke`, a replayed code or refresh token revoking its family)
//!   moves it — in this process at once, in every other through `auth_epoch`, which triggers
//!   on `demo_tokens` move (migration 0017), within one watcher interval — whoever revoked it,
//!   hand-written SQL included;
//! - without a trusted watcher there is no generation, and every check reads the database.
//!
//! Expiry is checked on each use against the injected clock (the row's `expires_at` is kept).
//! Unknown, revoked and refresh tokens are never kept: they always go to the database. Only the
//! hash is kept, never the token.

use std::sync::Arc;

use crate::domain::demo_scopes::ScopeSet;
use crate::store::generation_cache::GenerationCache;

/// At most this many tokens are kept; a full cache starts over.
pub const CAPACITY: usize = 10_000;

/// What a live access token stands for.
#[derive(Debug)]
pub struct LiveToken {
    pub account: String,
    pub scopes: ScopeSet,
    pub expires_at: i64,
}

/// By the token's SHA-256 hash (hex), under everyone's generation.
#[derive(Debug)]
pub struct TokenCache {
    entries: GenerationCache<String, Arc<LiveToken>>,
}

impl Default for TokenCache {
    fn default() -> Self {
        Self { entries: GenerationCache::new(CAPACITY) }
    }
}

impl TokenCache {
    /// The token with this hash, if it was found live under `generation`, the store's
    /// generation now.
    pub fn get(&self, generation: u64, token_hash: &str) -> Option<Arc<LiveToken>> {
        self.entries.get(token_hash, |_| Some(generation))
    }

    /// Keeps `token`, read after the generation was seen as `generation`, unless it has moved
    /// since (`current`): then the read may predate a revocation.
    pub fn insert(&self, generation: u64, current: Option<u64>, token_hash: &str, token: Arc<LiveToken>) {
        self.entries.insert(generation, current, token_hash.to_owned(), token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live() -> Arc<LiveToken> {
        let scopes = ScopeSet::parse_requested(None).unwrap();
        Arc::new(LiveToken { account: "alice".into(), scopes, expires_at: 100 })
    }

    #[test]
    fn a_token_is_kept_only_in_its_generation_and_a_late_read_is_not_kept() {
        let cache = TokenCache::default();
        assert!(cache.get(1, "h").is_none());
        cache.insert(1, Some(1), "h", live());
        assert_eq!(cache.get(1, "h").unwrap().account, "alice");
        assert!(cache.get(1, "other").is_none());
        assert!(cache.get(2, "h").is_none(), "a moved generation (a revocation) drops it");
        // Read under 2, but a revocation moved the generation to 3 before it was kept.
        cache.insert(2, Some(3), "h", live());
        assert!(cache.get(2, "h").is_none());
        // No trusted generation now: nothing is kept.
        cache.insert(2, None, "h", live());
        assert!(cache.get(2, "h").is_none());
        cache.insert(2, Some(2), "h", live());
        assert!(cache.get(2, "h").is_some());
        assert!(cache.get(3, "h").is_none(), "and the next revocation drops it again");
    }

    #[test]
    fn a_full_cache_starts_over() {
        let cache = TokenCache::default();
        for i in 0..CAPACITY {
            cache.insert(1, Some(1), &i.to_string(), live());
        }
        assert!(cache.get(1, "0").is_some());
        cache.insert(1, Some(1), "one more", live());
        assert!(cache.get(1, "0").is_none());
        assert!(cache.get(1, "one more").is_some());
    }
}
