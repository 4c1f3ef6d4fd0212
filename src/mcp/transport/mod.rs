//! How MCP messages travel between rmcp's Streamable HTTP service and a session's handler.
//!
//! - [`http_service`]: rmcp's HTTP service shared, not cloned per request.
//! - [`jsonrpc_guard`]: JSON-RPC framing errors answered as JSON-RPC, before rmcp.
//! - [`session_transport`]: one session's transport to its handler, without a task of its own,
//!   parked without an rmcp service while idle; [`routes`]: which stream a message goes on.
//! - [`event_log`]: SSE event ids and replay, so each event reaches a client once (the rules;
//!   each session's events are kept in its entry of the session table).
//! - [`request_ids`]: the server's request ids, unique per session across its services.
//!
//! Which sessions exist, who owns them and when they end is in [`crate::mcp::session`].

pub mod event_log;
pub mod http_service;
pub mod jsonrpc_guard;
pub mod request_ids;
pub mod routes;
pub mod session_transport;
