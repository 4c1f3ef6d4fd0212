//! MCP servers behind the broker (gateway mode): the servers themselves, their lists as last
//! read, and the users' approvals of (client, server) pairs.
//!
//! - [`server_rows`]: a server as stored and as the broker sees it, with what its calls carry;
//! - [`servers`]: registering, reading and removing servers ([`GatewayServers`]);
//! - [`lists`]: each server's tools, prompts and resources as last read, shared by instances
//!   ([`GatewayLists`]);
//! - [`consents`]: the (client, server) pairs each user approved, kept in memory per user
//!   ([`GatewayConsents`]).

pub(in crate::store) mod consents;
pub(in crate::store) mod lists;
pub(in crate::store) mod server_rows;
pub(in crate::store) mod servers;

pub use consents::{GatewayConsentRow, GatewayConsents, NewGatewayConsent, RecordGatewayConsent};
pub use lists::{GatewayLists, ListKind, ListSummary, StoredList};
pub use server_rows::{GatewayAuth, GatewayServerRow, secret_seal_context};
pub use servers::GatewayServers;
