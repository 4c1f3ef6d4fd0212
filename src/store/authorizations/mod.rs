//! Authorizations: one row per connect attempt (its id is the MCP `elicitationId`), from a
//! tool call's ask to the user's answer on the consent pages.
//!
//! - [`row`]: the row, its statuses and kinds, and its steps.

pub(in crate::store) mod row;

pub use row::{AuthorizationKind, AuthorizationRow, AuthorizationStatus, NewAuthorization};
