//! Servers behind the broker protected by the MCP authorization spec (`--auth mcp-oauth`;
//! MCP 2025-11-25 basic/authorization). The broker is an OAuth client of the server's
//! own authorization server, exactly as of a catalogue provider:
//!
//! - [`discovery`]: at `admin servers add`, the server's 401 names its protected-resource
//!   metadata (RFC 9728), which names the authorization server, whose RFC 8414 / OIDC metadata
//!   gives the endpoints; every URL is held to the broker's outbound rules and the issuer must
//!   match.
//! - [`registration`]: how the broker becomes a client there — a client ID metadata document
//!   it serves (where the server advertises them and the broker is on https), RFC 7591 dynamic
//!   registration otherwise, or the operator's own credentials.
//! - [`McpOauthSettings::provider`] ([`settings`]): what is stored becomes a provider entry `mcp-<name>`, so
//!   connect, consent, grants, refresh, `/connections`, disconnect and revocation treat the
//!   server's tokens like any provider's; the authorization request carries the server's
//!   canonical URL as RFC 8707 `resource`.
//!
//! [`settings`] holds what is stored and turns it into that provider entry.

pub mod discovery;
pub mod registration;
pub mod settings;

pub use settings::{
    McpOauthSettings, RegistrationKind, StoredAuthMethod, client_name, metadata_document_path, provider_id,
};
