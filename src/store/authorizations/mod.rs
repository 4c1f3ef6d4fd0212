//! Authorizations: one row per connect attempt (its id is the MCP `elicitationId`), from a
//! tool call's ask to the user's answer on the consent pages.
//!
//! - [`row`]: the row, its statuses and kinds, and its handle [`Authorizations`];
//! - [`steps`]: its steps, each a compare-and-swap on its status;
//! - [`approvals`]: an authorization that ends with the consent or the (client, server) pair it
//!   approves, in one transaction;
//! - [`list`]: the admin list, searched and filtered by the status as people read it;
//! - [`sealed`]: an open authorization's sealed PKCE verifier, rewrapped or given up.

pub(in crate::store) mod approvals;
pub(in crate::store) mod list;
pub(in crate::store) mod row;
pub(in crate::store) mod sealed;
pub(in crate::store) mod steps;

pub use approvals::{AllowClient, AllowOutcome, ApproveGatewayPair, CompleteConnect, ConnectCompleted, PairOutcome};
pub use list::AUTHORIZATION_STATUSES;
pub use row::{AuthorizationKind, AuthorizationRow, AuthorizationStatus, Authorizations, NewAuthorization};
pub use sealed::SealedVerifier;
pub use steps::{DeclineAuthorization, SentToProvider};
