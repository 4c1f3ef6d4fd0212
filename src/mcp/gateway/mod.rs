//! Gateway mode: MCP servers run by others sit behind `/mcp`. The client connects to the broker
//! only; it sees each server's tools under the server's prefix, and each call goes to that
//! server over a connection of the calling user's own, carrying that user's credential
//! (`docs/mcp.md`, "Servers behind the broker", has the table per auth kind).
//!
//! Three rooms, by what they do, and the state they share ([`state::Gateway`]):
//! - [`forward`]: one request forwarded to a server, top to bottom — a `tools/call`, a
//!   `prompts/get` or `resources/read`, a `resources/subscribe`, a user's own resources list —
//!   through the gates (the (client, server) approval, the user's credential, the attempt with
//!   the server's round trips, questions and pages relayed in the client's era, a 401's one
//!   refresh, a server that is down), audited and counted; and a 2026-07-28 retry that reaches
//!   another instance passed on to the one whose call waits.
//! - [`upstream`]: the user's link to one server — the pool of per-(user, server) connections
//!   that cannot be shared between users, opening one in the revision the server speaks, the
//!   HTTP client that carries the connection's current credential, what a connection hears
//!   from its server, and the tokens minted for `token-exchange` servers.
//! - [`catalogue`]: the registered servers and their lists (tools, prompts, resources,
//!   templates) as this instance serves them, kept current, shared with every instance through
//!   the database and read again when a server cannot announce a change.
//!
//! An `mcp-oauth` server's authorization server becomes a provider (`mcp-<name>`,
//! [`crate::providers::mcp_oauth`]) while the server is registered, so its users' tokens go
//! through the same connect, consent, refresh and revocation as any provider's.
//!
//! A `token-exchange` server is tied to a registered token-API service: each call carries a
//! token the broker mints for the user and that service's resource ([`upstream::minted`]), which
//! the server exchanges at `/token` for the user's provider token.

pub mod catalogue;
pub mod forward;
pub mod state;
pub mod upstream;
