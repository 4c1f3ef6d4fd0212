//! The database: one [`Store`] over SQLite (embedded default) or PostgreSQL, chosen by the URL.
//!
//! Every statement runs on a handle that says what it does to the caches of reads
//! ([`cache_effect`]: read, or write for one user, everyone or nothing), within a deadline
//! ([`deadlines`]); the caches follow [`generations`]. All of that is the [`machinery`], which
//! knows no table.

pub mod api_limits;
pub mod audit;
pub mod audit_queue;
pub mod authorizations;
pub mod consents;
pub mod console;
pub mod console_lists;
pub mod demo;
pub mod demo_keys;
pub mod external_users;
pub mod gateway_consents;
pub mod gateway_lists;
pub mod gateway_servers;
pub mod grant_accounts;
pub mod grant_cache;
pub mod grant_consents;
pub mod grant_events;
pub mod grants;
pub mod keys;
pub mod machinery;
pub mod oauth_clients;
pub mod oauth_codes;
pub mod refresh_failure;
pub mod request_budget;
pub mod request_state_uses;
pub mod sealed;
pub mod services;
pub mod sessions;
pub mod signals;
pub mod throttle;
pub mod users;
pub mod webhook_events;
pub mod webhooks;

pub use machinery::cache_effect::{CacheEffect, FetchIn, Reads, Writes};
pub use machinery::deadlines::DatabaseTimeouts;
pub use machinery::error::{StoreError, StoreResult};
pub use machinery::migrations::{AppliedMigration, known_sqlite_migrations};
pub(crate) use machinery::placeholders::numbered_values;
#[cfg(test)]
pub(crate) use machinery::store::migrated_for_tests;
pub use machinery::store::{Backend, Store, sqlite_path};
pub use machinery::{
    cache_effect, counts, deadlines, generation_cache, generations, own_moves, paging, search, unavailable,
};
