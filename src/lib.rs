//! # oauth-broker
//!
//! An MCP server (Streamable HTTP, protocol 2025-11-25) that lets AI tools act on a user's
//! behalf at third-party services without ever seeing the user's credentials.
//!
//! ```text
//! MCP client ─ tools/call ─▶ /mcp (mcp)         tool server ─ Basic + user token ─▶ /v1, /token (api)
//!        user = verified bearer JWT (identity::bearer)      user = token for its resource (api::acting)
//!                      └──────────────┬──────────────────────────────┘
//!                                     ▼  broker::access — one decision for every face:
//!           Ready(token) · Connect · MoreScopes · AllowClient (authorization row = elicitationId)
//!           · Unavailable · Refused        (consent per client: broker::consent; refresh: broker::tokens)
//!        MCP: token | -32042 / URL elicitation / isError text     API: JSON | RFC 9457 problem
//! Browser ─ /connect/{id} ─▶ login → same user? → consent (web) → provider /authorize (broker::flow)
//! Provider ─ /oauth/callback ─▶ state + PKCE + iss checks → code exchange (providers::client)
//!                              → tokens sealed (crypto) into grants → events
//! MCP session ◀─ notifications/elicitation/complete (mcp::handler) · tool server ◀─ /v1/authorizations/{id}
//! ```
//!
//! Modules: [`config`] settings; [`app`] builds the router and runs it; [`state`] what handlers
//! share ([`state::AppState`] for the faces, around the core's [`broker::Core`]); [`clock`] the
//! injected time; [`domain`] identifiers parsed at the edge; [`error_chain`] errors that keep
//! their cause, logged whole; [`display`] names others chose, made safe to show; [`events`] the signal that an
//! authorization finished; [`store`] SQLite/PostgreSQL: its machinery, and rooms of tables each read
//! and written through a handle (`store.grants()`); [`crypto`] sealing secrets; [`pkce`]
//! RFC 7636 S256; [`startup`] opening the database and the sealing key without stranding data; [`identity`] bearer tokens, browser sessions, sign-in (local and OIDC),
//! passwords; [`providers`] the client side of third-party OAuth (provider catalogue, token
//! endpoint calls); [`broker`] the core: access decisions, authorizations, consent,
//! the browser flow, refresh, connections, the call to a provider's API; [`keyring`] key rotations reaching a running server. Faces over the core: [`mcp`] the MCP server (its rooms: transport, session, tools, prompts,
//! resources, forms); [`web`]
//! hosted pages; [`api`] the token API for registered tool servers; [`admin`] the operator CLI.
//! Beside them: [`authorization_server`] the broker's own OAuth 2.1 authorization server for MCP
//! clients; [`demo_provider`] a strict built-in OAuth provider for trying the flow offline and
//! for tests; [`token_endpoint`] the token/revocation plumbing those two share.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod admin;
/// The token API for registered tool servers (`/v1/…`, service authentication, problem JSON).
pub mod api;
pub mod app;
pub mod authorization_server;
pub mod broker;
pub mod clock;
pub mod config;
pub mod crypto;
pub mod demo_provider;
pub mod display;
pub mod domain;
pub mod error_chain;
pub mod events;
pub mod every;
pub mod health;
pub mod identity;
pub mod keyring;
pub mod mcp;
pub mod net;
pub mod pkce;
pub mod providers;
pub mod startup;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod token_endpoint;
pub mod web;

pub use app::App;
pub use config::Config;
