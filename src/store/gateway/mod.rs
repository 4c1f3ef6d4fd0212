//! MCP servers behind the broker (gateway mode): the servers themselves, their lists as last
//! read, and the users' approvals of (client, server) pairs.
//!
//! - [`servers`]: registered servers, each with what its calls carry;
//! - [`lists`]: each server's tools, prompts and resources as last read, shared by instances;
//! - [`consents`]: the (client, server) pairs each user approved, kept in memory per user.

pub(in crate::store) mod consents;
pub(in crate::store) mod lists;
pub(in crate::store) mod servers;

pub use consents::{GatewayConsentRow, NewGatewayConsent};
pub use lists::{ListKind, ListSummary, StoredList};
pub use servers::{GatewayAuth, GatewayServerRow, secret_seal_context};
