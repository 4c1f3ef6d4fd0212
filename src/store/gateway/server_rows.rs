//! MCP servers behind the broker (gateway mode; migration 0022): registered by
//! `admin servers add`, read by every instance's gateway (`src/mcp/gateway/`). Each row is
//! parsed once, here, into a [`GatewayServerRow`] whose [`GatewayAuth`] says what each call
//! carries; nothing above compares the stored strings. A secret header's value is sealed by the
//! caller ([`secret_seal_context`]); this module never sees it in plain text.
use url::Url;

use crate::clock::Timestamp;
use crate::crypto::SealContext;
use crate::domain::gateway::{CredentialHeader, CredentialScheme, ServerName, ToolPrefix};
use crate::domain::{ProviderId, Scopes};
use crate::providers::mcp_oauth::McpOauthSettings;
use crate::store::machinery::error::StoreError;

/// How a server's calls are authorized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayAuth {
    /// The calling user's token for a catalogue provider, with these scopes, in `header` as
    /// `scheme token`.
    Provider { provider: ProviderId, scopes: Scopes, header: CredentialHeader, scheme: CredentialScheme },
    /// Nothing: the server is open (or trusts the network).
    None,
    /// The operator's secret, the same for every user, in `header`; sealed.
    SecretHeader { header: CredentialHeader, secret_sealed: Vec<u8> },
    /// The server's own MCP authorization: each user's token from its authorization server,
    /// kept as provider `provider` (`mcp-<name>`), asked with `scopes`, sent as
    /// `Authorization: Bearer`. The client secret (if the registration has one) is sealed in
    /// `secret_sealed`, so key rewrap and `keys forget` cover it as the secret header's.
    McpOauth { provider: ProviderId, scopes: Scopes, settings: Box<McpOauthSettings>, secret_sealed: Option<Vec<u8>> },
    /// A token the broker mints per user for a registered token-API service (`services.id`),
    /// for that service's resource, sent as `Authorization: Bearer`; the server exchanges it
    /// at `/token` with its own service credentials (`crate::mcp::gateway::minted`).
    TokenExchange { service_id: String },
}

impl GatewayAuth {
    /// As stored in `auth_kind`, and as the admin CLI and pages name it.
    pub fn kind(&self) -> &'static str {
        match self {
            GatewayAuth::Provider { .. } => "provider",
            GatewayAuth::None => "none",
            GatewayAuth::SecretHeader { .. } => "secret_header",
            GatewayAuth::McpOauth { .. } => "mcp_oauth",
            GatewayAuth::TokenExchange { .. } => "token_exchange",
        }
    }

    /// Whether each user brings their own credential (so a user's first call may need them to
    /// connect, and a tool list can only be read with some user's credential).
    pub fn per_user(&self) -> bool {
        matches!(self, GatewayAuth::Provider { .. } | GatewayAuth::McpOauth { .. } | GatewayAuth::TokenExchange { .. })
    }

    /// The provider whose token each user's calls carry, with the scopes it must have, the
    /// header and the scheme: `provider` servers as registered, `mcp-oauth` ones as a bearer.
    pub fn user_credential(&self) -> Option<(&ProviderId, &Scopes, CredentialHeader, CredentialScheme)> {
        match self {
            GatewayAuth::Provider { provider, scopes, header, scheme } => {
                Some((provider, scopes, header.clone(), scheme.clone()))
            }
            GatewayAuth::McpOauth { provider, scopes, .. } => {
                Some((provider, scopes, CredentialHeader::authorization(), CredentialScheme::bearer()))
            }
            GatewayAuth::None | GatewayAuth::SecretHeader { .. } | GatewayAuth::TokenExchange { .. } => None,
        }
    }
}

/// A server as the rest of the broker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayServerRow {
    /// Random; a server removed and added again under the same name is another server.
    pub id: String,
    pub name: ServerName,
    pub url: Url,
    pub prefix: ToolPrefix,
    pub auth: GatewayAuth,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Where a server's secret is sealed: bound to its table, column and row, so a blob copied to
/// another row does not open.
pub fn secret_seal_context(server_id: &str) -> SealContext<'_> {
    SealContext { table: "gateway_servers", column: "secret_sealed", row_id: server_id, owner: "" }
}

#[derive(sqlx::FromRow)]
pub(in crate::store) struct RawGatewayServer {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) url: String,
    pub(super) prefix: String,
    pub(super) auth_kind: String,
    pub(super) provider: Option<String>,
    pub(super) scopes: String,
    pub(super) header_name: Option<String>,
    pub(super) header_scheme: Option<String>,
    pub(super) secret_sealed: Option<Vec<u8>>,
    pub(super) oauth: Option<String>,
    pub(super) service_id: Option<String>,
    pub(super) created_at: Timestamp,
    pub(super) updated_at: Timestamp,
}

pub(in crate::store) const COLUMNS: &str = "id, name, url, prefix, auth_kind, provider, scopes, header_name, header_scheme, \
                       secret_sealed, oauth, service_id, created_at, updated_at";

impl TryFrom<RawGatewayServer> for GatewayServerRow {
    type Error = StoreError;

    fn try_from(raw: RawGatewayServer) -> Result<Self, Self::Error> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("gateway server {:?} has {what}", raw.id));
        let name = ServerName::parse(&raw.name).map_err(|_| corrupt("a malformed name"))?;
        let url = Url::parse(&raw.url).map_err(|_| corrupt("a malformed URL"))?;
        crate::net::check_upstream_url(&url).map_err(|_| corrupt("a URL the broker may not call"))?;
        let prefix = ToolPrefix::parse(&raw.prefix).map_err(|_| corrupt("a malformed prefix"))?;
        let header = || {
            raw.header_name
                .as_deref()
                .map(CredentialHeader::parse)
                .transpose()
                .map_err(|_| corrupt("a malformed header"))
        };
        let auth = match raw.auth_kind.as_str() {
            "provider" => GatewayAuth::Provider {
                provider: raw
                    .provider
                    .as_deref()
                    .map(ProviderId::parse)
                    .transpose()
                    .ok()
                    .flatten()
                    .ok_or_else(|| corrupt("no provider"))?,
                scopes: Scopes::from_space_separated(&raw.scopes).map_err(|_| corrupt("malformed scopes"))?,
                header: header()?.ok_or_else(|| corrupt("no header"))?,
                scheme: CredentialScheme::parse(raw.header_scheme.as_deref().unwrap_or_default())
                    .map_err(|_| corrupt("a malformed scheme"))?,
            },
            "none" => GatewayAuth::None,
            "secret_header" => GatewayAuth::SecretHeader {
                header: header()?.ok_or_else(|| corrupt("no header"))?,
                secret_sealed: raw.secret_sealed.clone().ok_or_else(|| corrupt("no secret"))?,
            },
            "mcp_oauth" => {
                let settings: McpOauthSettings = raw
                    .oauth
                    .as_deref()
                    .and_then(|json| serde_json::from_str(json).ok())
                    .ok_or_else(|| corrupt("no readable authorization settings"))?;
                settings.check().map_err(|_| corrupt("an authorization server URL the broker may not call"))?;
                GatewayAuth::McpOauth {
                    provider: crate::providers::mcp_oauth::provider_id(&name),
                    scopes: Scopes::from_space_separated(&raw.scopes).map_err(|_| corrupt("malformed scopes"))?,
                    settings: Box::new(settings),
                    secret_sealed: raw.secret_sealed.clone(),
                }
            }
            "token_exchange" => GatewayAuth::TokenExchange {
                service_id: raw.service_id.clone().filter(|id| !id.is_empty()).ok_or_else(|| corrupt("no service"))?,
            },
            _ => return Err(corrupt("an unknown auth kind")),
        };
        Ok(GatewayServerRow {
            id: raw.id,
            name,
            url,
            prefix,
            auth,
            created_at: raw.created_at,
            updated_at: raw.updated_at,
        })
    }
}
