//! Who may call `/mcp`: the broker's own OAuth 2.1 authorization server, the bearer tokens it
//! issues, and an OpenID Connect issuer in its place.

mod bearer;
mod endpoints;
mod oidc;
