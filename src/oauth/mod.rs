//! The broker as an OAuth 2 client of third-party providers.
//!
//! - [`catalogue`]: the compiled-in catalogue of real providers and the operator's tables over it.
//! - [`providers`]: the enabled providers (and the demo one).
//! - [`scopes`]: which scopes a provider offers; the rest are refused before it sees them.
//! - [`client`]: token-endpoint calls (code exchange, refresh, revocation) over our own HTTP
//!   client (no redirects, timeouts, errors classified); [`token_response`] reads the answers.
//! - [`api`]: calling a provider's API with the user's token (`provider_request`).

pub mod api;
pub mod catalogue;
pub mod client;
pub mod providers;
pub mod scopes;
pub mod token_response;
