//! The broker as an OAuth 2 client of third-party providers.
//!
//! - [`catalogue`]: the compiled-in catalogue of real providers and the operator's tables over it;
//!   [`fields`]: one such table.
//! - [`provider`]: one provider's resolved settings; [`registry`]: the enabled providers.
//! - [`api_key`]: providers whose users enter an API key or personal access token instead.
//! - [`mcp_oauth`]: MCP servers behind the broker protected by MCP authorization: discovery,
//!   registration, and the provider entry their authorization server becomes.
//! - [`scopes`]: which scopes a provider offers; the rest are refused before it sees them.
//! - [`client`]: token-endpoint calls (code exchange, refresh, revocation) over our own HTTP
//!   client (no redirects, timeouts); [`token_response`] reads the answers; [`error`] says how
//!   a call failed.

pub mod api_key;
pub mod catalogue;
pub mod client;
pub mod error;
pub mod fields;
pub mod mcp_oauth;
pub mod provider;
pub mod registry;
pub mod scopes;
pub mod token_response;
