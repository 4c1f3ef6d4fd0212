//! The broker's own OAuth 2.1 authorization server's rows (`src/authorization_server/`): the MCP
//! clients registered with it, and what it issued them.
//!
//! - [`clients`]: registered clients (RFC 7591), a confidential one's secret as its hash
//!   ([`OAuthClients`]);
//! - [`grants`]: approvals of a client by a user ([`OAuthGrants`]);
//! - [`codes`]: the authorization codes and refresh tokens that descend from a grant.

pub(in crate::store) mod clients;
pub(in crate::store) mod codes;
pub(in crate::store) mod grants;

pub use clients::{OAuthClientRow, OAuthClients};
pub use codes::{OAuthCodeRow, OAuthRefreshTokenRow};
pub use grants::{NewOAuthCode, NewOAuthGrant, OAuthGrantFields, OAuthGrantRow, OAuthGrants, USED_CODE_RETENTION_SECS};
