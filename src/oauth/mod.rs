//! The broker as an OAuth 2 client of third-party providers.
//!
//! - [`providers`]: the configured providers (and the demo one).
//! - [`client`]: token-endpoint calls (code exchange, refresh, revocation) through the `oauth2`
//!   crate over our own HTTP client (no redirects, timeouts, errors classified).
//! - [`api`]: calling a provider's API with the user's token (`provider_request`).

pub mod api;
pub mod client;
pub mod providers;
