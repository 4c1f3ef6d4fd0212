//! The broker as an OAuth 2 client of third-party providers.
//!
//! - [`providers`]: the configured providers (and the demo one).
//! - [`client`]: token-endpoint calls (code exchange, refresh, revocation) through the `oauth2`
//!   crate over our own HTTP client (no redirects, timeouts, errors classified).
//! - [`flow`]: the browser leg: approve → redirect with state + PKCE → callback.
//! - [`tokens`]: sealing tokens into grants and handing out a fresh access token, refreshing
//!   once per grant at a time.
//! - [`api`]: calling a provider's API with the user's token (`provider_request`).

pub mod api;
pub mod client;
pub mod consent;
pub mod flow;
pub mod providers;
pub mod tokens;
