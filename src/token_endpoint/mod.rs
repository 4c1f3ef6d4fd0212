//! The plumbing every OAuth 2.1 authorization server in this crate shares: the broker's own
//! ([`crate::authorization_server`]) and the strict demo provider ([`crate::demo_provider`]).
//!
//! ```text
//! POST /token, POST /revoke
//!   body read, form required, parameters parsed (params)       RFC 6749 §3.1/§3.2
//!   client credentials parsed (presented_client)               RFC 6749 §2.3.1
//!     → checked by the server's own verification               (each server)
//!   repeated parameters refused, then grant_type / token       (endpoint)
//!   answered as JSON or an RFC 6749 §5.2 error, no-store       (oauth_error)
//! ```
//!
//! Each server keeps what is its own: which clients exist and how their secrets are checked,
//! the grant types it dispatches to, what a revoked token takes with it, and the `realm` of its
//! `invalid_client` challenge.

pub mod endpoint;
pub mod oauth_error;
pub mod params;
pub mod presented_client;
