//! What every room of the store runs on, knowing no table: the [`store::Store`] handle (pool,
//! backend, connect, close) and its [`migrations`]; its errors ([`error`]) and which of them
//! mean the database is away for now ([`unavailable`]); how each statement declares what it
//! does to the caches of reads ([`cache_effect`]), checked in debug builds ([`declared`]),
//! within a deadline ([`deadlines`]); the caches' [`generations`], this process's own moves of
//! their counter ([`own_moves`]) and the map they share ([`generation_cache`]); what rooms keep
//! in memory ([`kept`]); admin lists' pages and searches ([`paging`], [`search`]) and the
//! dashboard's bounded [`counts`]; and numbering a statement's parameters ([`placeholders`]).

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
pub mod unavailable;
pub mod write;
