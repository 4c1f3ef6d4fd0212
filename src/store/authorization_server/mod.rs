//! The broker's own OAuth 2.1 authorization server's rows (`src/authorization_server/`): the MCP
//! clients registered with it, and what it issued them.
//!
//! - [`clients`]: registered clients (RFC 7591), a confidential one's secret as its hash;
//! - [`grants`]: approvals of a client by a user, their authorization codes and refresh tokens.

pub(in crate::store) mod clients;
pub(in crate::store) mod grants;

pub use clients::OAuthClientRow;
pub use grants::{
    NewOAuthCode, NewOAuthGrant, OAuthCodeRow, OAuthGrantFields, OAuthGrantRow, OAuthRefreshTokenRow,
    USED_CODE_RETENTION_SECS,
};
