//! The broker core: every decision about users' connections, in its own types, for every face.
//!
//! - [`access`]: may this client have this user's token for this provider and scopes — and if
//!   not, what must the user do ([`access::Access`]).
//! - [`authorizations`]: opening the authorization behind a connect or consent link, and where
//!   one stands.
//! - [`flow`]: the browser leg of an authorization: approve → provider (state + PKCE) →
//!   callback → sealed grant; consent-only approvals; declines.
//! - [`api_key`]: the same authorization finished with an API key the user enters instead of
//!   an OAuth flow: checked at the provider, sealed into a grant like a token.
//! - [`consent`]: consent per client (which client may use which connection).
//! - [`gateway_consent`]: the user's approval of each (client, server) pair for the servers
//!   behind the broker (`pair_approval` is what the connect and consent flows record with it).
//! - [`tokens`]: sealing tokens into grants, handing out a fresh access token, disconnecting;
//!   [`sealed_grant`] opens a grant's tokens and marks one that no longer works for re-consent.
//! - [`refresh`]: one refresh per grant at a time, on one instance or many, without ever losing
//!   the rotated refresh token a provider issued ([`refresh_locks`] is its in-process memory).
//!   [`refresh_margin`] says when a token is due (within its margin of expiring);
//!   [`backoff`] how long a refresh waits after a transient failure.
//! - [`provider_apps`]: which OAuth app a connection uses — its organization's own at that
//!   provider, or the operator's — and storing an organization's app.
//! - [`rewrap`]: moving every sealed value to the active encryption key (`admin keys rewrap`).
//! - [`provider_call`]: a call to a provider's API as the user, for every face: the path kept
//!   under the API base (the grant's own `instance_url`, or the provider's), the token
//!   injected, one forced refresh and one retry after a 401, tokens redacted from the answer.
//! - [`connections`]: the one listing of a user's connections that every face renders;
//!   [`connection_status`] decides where each stands (ready, revoked, refresh failing, …).
//! - [`service_access`]: may this registered service have this user's token — the token API's
//!   and the token exchange's checks ([`service_acting`]: which provider, whom the service acts
//!   for), then [`access`]; a refusal is a [`service_refusal::ServiceRefusal`].
//!
//! Faces — MCP (`mcp`), the hosted pages (`web`), the token API (`api`), the authorization
//! server (`authorization_server`), the admin CLI (`admin`) — call in here and translate the
//! answers. Nothing here imports a face or the MCP SDK's types; it works on [`Core`], which holds
//! no MCP session, page or identity key (a service's subject token is checked with the identity
//! context its caller hands in).

pub mod access;
pub mod api_key;
pub mod authorizations;
pub mod backoff;
mod built_apps;
pub mod connection_events;
pub mod connection_status;
pub mod connections;
pub mod consent;
mod core;
pub mod flow;
pub mod gateway_consent;
mod pair_approval;
pub mod provider_apps;
pub mod provider_call;
pub mod refresh;
pub mod refresh_locks;
mod refresh_margin;
pub mod rewrap;
mod sealed_grant;
pub mod service_access;
pub mod service_acting;
pub mod service_refusal;
pub mod tokens;

pub use self::core::Core;
