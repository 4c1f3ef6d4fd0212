//! What every room of the store runs on, knowing no table:
//!
//! - [`store`]: the [`store::Store`] handle itself (pool, backend, connect, close), and
//!   [`migrations`] and [`backup`]s of its database;
//! - [`error`]: what a call fails with, and which failures mean the database is away for now
//!   ([`transient`] for sqlx's errors, [`unavailable`] anywhere in an error's chain);
//! - [`cache_effect`]: the handle each statement runs on, declaring what it does to the caches
//!   of reads, checked in debug builds ([`declared`]); a [`transaction`]'s effect;
//! - [`write`]: writes as values, and the one way to write one with an event beside it;
//! - [`deadlines`]: a bound on every call, even when the database does not answer;
//! - [`generations`]: when an answer read earlier may still be used, the [`watcher`] of other
//!   processes' moves, this process's own moves ([`own_moves`]) and the map the caches share
//!   ([`generation_cache`]);
//! - [`kept`]: what rooms keep in memory beside their rows;
//! - [`paging`] and [`search`]: admin lists' pages and searches; [`counts`]: the dashboard's
//!   bounded counts; [`placeholders`]: numbering a statement's parameters.

pub mod backup;
pub mod cache_effect;
pub mod counts;
pub mod deadlines;
mod declared;
pub mod error;
pub mod generation_cache;
pub mod generations;
pub mod kept;
pub mod migrations;
pub mod own_moves;
pub mod paging;
pub mod placeholders;
pub mod search;
pub mod store;
pub mod transaction;
pub mod transient;
pub mod unavailable;
pub mod watcher;
pub mod write;
