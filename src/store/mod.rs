//! The database: one [`Store`] over SQLite (embedded default) or PostgreSQL, chosen by the URL,
//! and its rooms, each holding the tables of one kind of thing.
//!
//! - [`machinery`]: what every room runs on and which knows no table: the handle, its errors,
//!   migrations, the caches' generations and what each statement does to them, deadlines,
//!   pages, searches and counts;
//! - `handles`: the accessors (`store.grants()`, …), one per table handle: every table is read
//!   and written through its room's handle, never through `Store` itself;
//! - [`organizations`]: the organizations and who belongs to each (`store.in_org(&id)` reaches
//!   one organization's rooms);
//! - [`users`]: users, local and external, and their browser sessions;
//! - [`grants`]: what a user connected (grants with their accounts, the reads every tool call
//!   makes of them and their cache, refresh failures) and the clients allowed to use each one;
//! - [`authorizations`]: connect attempts, from a tool call's ask to the user's answer;
//! - [`authorization_server`]: the broker's own authorization server's clients and what it
//!   issued them;
//! - [`token_api`]: the token API's services, limits, request budgets and audit queue;
//! - [`webhooks`]: services' webhooks and their outbox;
//! - [`gateway`]: the servers behind the broker, their lists and the users' approvals of them;
//! - [`audit`]: the audit log and what the admin console counts and lists;
//! - [`sealing`]: the JWT signing keys and the inventory of sealed values;
//! - [`demo`]: the demo provider's codes, tokens, notes and API keys;
//! - [`signals`]: what one instance tells the others, as rows;
//! - [`request_states`]: single use of MCP `requestState` values;
//! - [`throttle`]: attempts counted in a window: the sign-in throttle's and other budgets'.

pub mod audit;
pub mod authorization_server;
pub mod authorizations;
pub mod demo;
pub mod gateway;
pub mod grants;
mod handles;
pub mod machinery;
pub mod organizations;
pub mod request_states;
pub mod sealing;
pub mod signals;
pub mod throttle;
pub mod token_api;
pub mod users;
pub mod webhooks;

pub use machinery::cache_effect::{CacheEffect, FetchIn, Reads, Writes};
pub use machinery::deadlines::DatabaseTimeouts;
pub use machinery::error::{StoreError, StoreResult};
pub use machinery::migrations::{AppliedMigration, known_sqlite_migrations};
#[cfg(test)]
pub(crate) use machinery::store::migrated_for_tests;
pub use machinery::store::{Backend, Store, sqlite_path};
pub use machinery::{counts, generation_cache, generations, paging, search, unavailable};
