//! An MCP session, kept in one place.
//!
//! - [`table`]: the live sessions, one entry each (owner, protocol era, scope, liveness,
//!   transport, event log) in one map behind one lock; one way out of it, which takes the
//!   session's event log with it.
//! - [`manager`]: rmcp's `SessionManager` over the table: opening, the one sweep that parks and
//!   closes, and closing, whatever ends a session.
//! - [`owner`]: the check that a request names a session of its own user and client, and the
//!   SSE priming events taken out for sessions on an earlier protocol revision.
//! - [`scope`]: what a session remembers across its services (elicitations, subscriptions, log
//!   level) and where its notifications go.
//! - [`shrink`] and [`heap_trim`]: closed sessions give their memory back.
//!
//! The transport under each session (its streams, its parked or running rmcp service) and the
//! rules of its event log (ids, replay, bounds) are in [`crate::mcp::transport`]; the log's
//! events themselves are kept in the session's entry.

pub mod heap_trim;
pub mod manager;
pub mod owner;
pub mod scope;
pub mod shrink;
pub mod table;

pub use table::{IDLE_SECONDS, SessionTable};
