//! Authorizations: one row per connect attempt (its id is the MCP `elicitationId`), from a
//! tool call's ask to the user's answer on the consent pages.
//!
//! - [`row`]: the row, its statuses and kinds, and its steps;
//! - [`approvals`]: an authorization that ends with the consent or the (client, server) pair it
//!   approves, in one transaction.

pub(in crate::store) mod approvals;
pub(in crate::store) mod row;

pub use approvals::{AllowOutcome, ConnectCompleted, PairOutcome};
pub use row::{AuthorizationKind, AuthorizationRow, AuthorizationStatus, NewAuthorization};
