//! The user's link to one server behind the broker:
//!
//! - [`pool`]: this instance's per-(user, server) connections ([`pool::Upstream`]), keyed so
//!   they cannot be shared between users.
//! - [`opening`], [`revision`]: opening a connection in the revision the server speaks
//!   (2025-11-25 sessions or stateless 2026-07-28), found by the first connection and
//!   remembered.
//! - [`credential`]: what a request carries and where each kind of server's credential comes
//!   from; [`transport`]: the HTTP client that puts the connection's *current* credential on
//!   each request.
//! - [`client`]: what a connection hears from its server (list changes, progress, log messages,
//!   questions, completions, resource updates); [`questions`]: which forwarded request a
//!   server's question belongs to.
//! - [`minted`]: the per-user tokens a `token-exchange` server's calls carry.

pub mod client;
pub mod credential;
pub mod minted;
pub mod opening;
pub mod pool;
pub mod questions;
pub mod revision;
pub mod transport;
