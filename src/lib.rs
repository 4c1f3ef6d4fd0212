//! # oauth-broker
//!
//! An MCP server (Streamable HTTP: 2025-11-25 sessions and 2026-07-28 stateless requests on one
//! endpoint) that lets AI tools act on a user's behalf at third-party services without ever
//! seeing the user's credentials.
//!
//! ```text
//! MCP client ─ tools/call ─▶ /mcp (mcp)     tool server ─ Basic + user token ─▶ /v1 (api), /token (authorization_server)
//!        user = verified bearer JWT (identity::bearer)  user = token for its resource (broker::service_acting)
//!                      └──────────────┬──────────────────────────────┘
//!                                     ▼  broker::access — one decision for every face:
//!           Ready(token) · Connect · MoreScopes · AllowClient (authorization row = elicitationId)
//!           · Unavailable · Refused        (consent per client: broker::consent; refresh: broker::tokens)
//!        MCP: token | -32042 / URL elicitation / isError text     API: JSON | RFC 9457 problem
//! Browser ─ /connect/{id} ─▶ login → same user? → consent (web) → provider /authorize (broker::flow)
//! Provider ─ /oauth/callback ─▶ state + PKCE + iss checks → code exchange (providers::client)
//!                              → tokens sealed (crypto) into grants → events
//! MCP session ◀─ notifications/elicitation/complete (mcp::notifications) · tool server ◀─ /v1/authorizations/{id}
//! ```
//!
//! # Layout
//!
//! Lowest first: each module uses only those listed before it, and the faces, side by side, use
//! none of each other (`tests/api/structure/layers.rs` holds the order and checks it).
//!
//! - [`clock`]: the injected time, in Unix seconds.
//! - [`every`]: the loop of every background sweeper and refresher.
//! - [`error_chain`]: errors that keep their cause, logged whole.
//! - [`display`]: names others chose, made safe to show.
//! - [`crypto`]: sealing secrets at rest (AES-256-GCM under a key id), hashes, random values.
//! - [`pkce`]: RFC 7636 S256, for the broker's two authorization servers.
//! - [`domain`]: identifiers parsed at the edge (`ProviderId`, `Scopes`, who a client is, …).
//! - [`net`]: loopback and public addresses, the client of a request, draining unread bodies.
//! - [`telemetry`]: metrics, request ids, trace spans.
//! - [`providers`]: the client side of third-party OAuth (provider catalogue, token endpoint calls).
//! - [`config`]: settings, from flags, environment, file and defaults.
//! - [`store`]: the database, SQLite or PostgreSQL: its machinery (caches, deadlines, paging,
//!   search, writes with their event) apart from its tables, each room reached by its handle
//!   (`store.grants()…`).
//! - [`events`]: the signal that something happened, on every instance; webhooks to services.
//! - [`token_endpoint`]: the token and revocation endpoints' plumbing both authorization servers share.
//! - [`identity`]: bearer tokens, browser sessions, sign-in (local and OIDC), passwords, services' Basic.
//! - [`broker`]: the core — access decisions, authorizations, consent, the browser flow, refresh,
//!   connections, the call to a provider's API, a service's access to a user's token.
//! - [`state`]: what handlers share ([`state::AppState`] for the faces, around [`broker::Core`]).
//! - [`keyring`]: key rotations reaching a running server.
//! - [`health`]: `/healthz` and `/readyz`.
//! - [`html`]: what every face's pages share — rendering, message and error pages, CSRF, security headers.
//! - [`problem`]: a registered service's refusals, worded once (problem JSON, RFC 6749 errors).
//! - Faces, side by side:
//!   [`mcp`] the MCP server (the protocol's handlers, tools as types with one request context,
//!   the access decisions they share, prompts, resources, asking the user, transport and
//!   sessions, and the gateway: forwarding, the upstream link, the catalogue of servers) ·
//!   [`web`] the hosted pages ·
//!   [`api`] the token API for registered tool servers ·
//!   [`authorization_server`] the broker's own OAuth 2.1 authorization server, and the token exchange ·
//!   [`demo_provider`] a strict built-in OAuth provider for trying the flow offline and for tests.
//! - [`startup`]: opening the database and the sealing key without stranding data.
//! - [`app`]: builds the router from each face's `router()` and runs it.
//! - [`admin`]: the command line (`serve`, `migrate`, `admin …`), the composition root.
//!
//! # Where a new thing goes
//!
//! - **A tool of the broker's**: a file in `mcp/tools/` with its type (its arguments, parsed
//!   once) and its `run(cx)`, its entry in `mcp/tools/catalogue.rs` and an arm in each match of
//!   `mcp::tools::call::BrokerTool`; a decision it needs is the core's (`broker/`), and asking
//!   for a token goes through `mcp::access`.
//! - **A table**: a migration in both `migrations/sqlite` and `migrations/postgres` (same
//!   number), its rows and statements in the `store/` room of what they hold (a new room gets a
//!   handle accessor in `store/handles.rs`), each statement saying its cache effect; a write that
//!   services hear of goes through `store::machinery::write` with its event. A table of an
//!   organization's rows is reached through `store.in_org(&id)`, whose handle carries the
//!   organization into every statement.
//! - **A page**: its handler in `web/` (or `web/admin/`) with its askama struct and a template in
//!   `templates/`, routed in that room's `router()`; it renders through `html::render` and fails
//!   with an `html::PageError`.
//! - **An endpoint of the token API**: a file in `api/` that authenticates the service
//!   (`identity::service_auth`), asks the core, and answers problem JSON (`problem`).
//! - **Something two faces need**: below both — in the core if it decides, in `html` or
//!   `problem` if it words an answer — never one face importing another (the layer test fails).

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod admin;
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
pub mod html;
pub mod identity;
pub mod keyring;
pub mod mcp;
pub mod net;
pub mod pkce;
pub mod problem;
pub mod providers;
pub mod startup;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod token_endpoint;
pub mod web;

pub use app::App;
pub use config::Config;
