//! The broker core: every decision about users' connections, in its own types, for every face.
//!
//! - [`access`]: may this client have this user's token for this provider and scopes — and if
//!   not, what must the user do ([`access::Access`]).
//! - [`authorizations`]: opening the authorization behind a connect or consent link, and where
//!   one stands.
//! - [`flow`]: the browser leg of an authorization: approve → provider (state + PKCE) →
//!   callback → sealed grant; consent-only approvals; declines.
//! - [`consent`]: consent per client (which client may use which connection).
//! - [`tokens`]: sealing tokens into grants, handing out a fresh access token, disconnecting.
//! - [`refresh`]: one refresh per grant at a time, on one instance or many, without ever losing
//!   the rotated refresh token a provider issued ([`refresh_locks`] is its in-process memory).
//!   [`freshness`] says when a token is due (the refresh margin); [`backoff`] how long a
//!   refresh waits after a transient failure; [`replay`] the one forced refresh after a
//!   provider's 401.
//! - [`rewrap`]: moving every sealed value to the active encryption key (`admin keys rewrap`).
//! - [`api_base`]: where a grant's API calls go (its own `instance_url`, or the provider's).
//! - [`connections`]: the one listing of a user's connections that every face renders.
//!
//! Faces — MCP (`mcp`), the hosted pages (`web`), the token API (`api`), the admin CLI
//! (`admin`) — call in here and translate the answers. Nothing here imports a face or the MCP
//! SDK's types; it works on [`crate::state::Core`], which holds no MCP session or prompt.

pub mod access;
pub mod api_base;
pub mod authorizations;
pub mod backoff;
pub mod connections;
pub mod consent;
pub mod flow;
mod freshness;
pub mod refresh;
pub mod refresh_locks;
pub mod replay;
pub mod rewrap;
pub mod tokens;
