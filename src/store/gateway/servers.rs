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
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::paging::{Cursor, ListSql, Paged, Search, Window};
use crate::store::machinery::store::Store;

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
struct RawGatewayServer {
    id: String,
    name: String,
    url: String,
    prefix: String,
    auth_kind: String,
    provider: Option<String>,
    scopes: String,
    header_name: Option<String>,
    header_scheme: Option<String>,
    secret_sealed: Option<Vec<u8>>,
    oauth: Option<String>,
    service_id: Option<String>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const COLUMNS: &str = "id, name, url, prefix, auth_kind, provider, scopes, header_name, header_scheme, \
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

impl Store {
    /// Registers a server. [`StoreError::Conflict`] if its name or prefix is taken (the
    /// caller checks overlapping prefixes first, with the names of both servers).
    pub async fn create_gateway_server(&self, row: &GatewayServerRow) -> StoreResult<()> {
        let mut oauth = None;
        let mut service_id = None;
        let (provider, scopes, header, scheme, secret) = match &row.auth {
            GatewayAuth::Provider { provider, scopes, header, scheme } => (
                Some(provider.as_str()),
                scopes.to_space_separated(),
                Some(header.as_str()),
                Some(scheme.as_str()),
                None,
            ),
            GatewayAuth::None => (None, String::new(), None, None, None),
            GatewayAuth::SecretHeader { header, secret_sealed } => {
                (None, String::new(), Some(header.as_str()), None, Some(secret_sealed.clone()))
            }
            GatewayAuth::McpOauth { provider, scopes, settings, secret_sealed } => {
                oauth = Some(serde_json::to_string(settings).map_err(|e| StoreError::Corrupt(e.to_string()))?);
                (Some(provider.as_str()), scopes.to_space_separated(), None, None, secret_sealed.clone())
            }
            GatewayAuth::TokenExchange { service_id: id } => {
                service_id = Some(id.as_str());
                (None, String::new(), None, None, None)
            }
        };
        sqlx::query(&format!(
            "INSERT INTO gateway_servers ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
        ))
        .bind(&row.id)
        .bind(row.name.as_str())
        .bind(row.url.as_str())
        .bind(row.prefix.as_str())
        .bind(row.auth.kind())
        .bind(provider)
        .bind(scopes)
        .bind(header)
        .bind(scheme)
        .bind(secret)
        .bind(oauth)
        .bind(service_id)
        .bind(row.created_at)
        .bind(row.updated_at)
        // Every instance's gateway reloads its list when everyone's generation moves.
        .execute(self.write(CacheEffect::Everyone))
        .await
        .map_err(StoreError::from_write)?;
        Ok(())
    }

    /// Every registered server, by name.
    pub async fn list_gateway_servers(&self) -> StoreResult<Vec<GatewayServerRow>> {
        sqlx::query_as::<_, RawGatewayServer>(&format!("SELECT {COLUMNS} FROM gateway_servers ORDER BY name"))
            .fetch_all_in(self.read())
            .await?
            .into_iter()
            .map(GatewayServerRow::try_from)
            .collect()
    }

    pub async fn gateway_server_by_id(&self, id: &str) -> StoreResult<Option<GatewayServerRow>> {
        sqlx::query_as::<_, RawGatewayServer>(&format!("SELECT {COLUMNS} FROM gateway_servers WHERE id = $1"))
            .bind(id)
            .fetch_optional_in(self.read())
            .await?
            .map(GatewayServerRow::try_from)
            .transpose()
    }

    pub async fn gateway_server_by_name(&self, name: &str) -> StoreResult<Option<GatewayServerRow>> {
        sqlx::query_as::<_, RawGatewayServer>(&format!("SELECT {COLUMNS} FROM gateway_servers WHERE name = $1"))
            .bind(name)
            .fetch_optional_in(self.read())
            .await?
            .map(GatewayServerRow::try_from)
            .transpose()
    }

    /// Replaces an `mcp-oauth` server's settings and sealed client secret (`servers
    /// rediscover`); false if the server is gone. Every instance reloads it (a new
    /// `updated_at`), with its provider.
    pub async fn update_gateway_server_oauth(&self, id: &str, auth: &GatewayAuth, now: Timestamp) -> StoreResult<bool> {
        let GatewayAuth::McpOauth { settings, secret_sealed, .. } = auth else {
            return Err(StoreError::Corrupt("only an mcp-oauth server's settings are replaced".into()));
        };
        let oauth = serde_json::to_string(settings).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let done =
            sqlx::query("UPDATE gateway_servers SET oauth = $1, secret_sealed = $2, updated_at = $3 WHERE id = $4")
                .bind(oauth)
                .bind(secret_sealed)
                .bind(now)
                .bind(id)
                .execute(self.write(CacheEffect::Everyone))
                .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Removes the server by name; false if there was none.
    pub async fn remove_gateway_server(&self, name: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM gateway_servers WHERE name = $1")
            .bind(name)
            .execute(self.write(CacheEffect::Everyone))
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// One page of servers matching `search`, by name (the admin pages; one query).
    pub async fn page_gateway_servers(&self, search: &Search, window: Window) -> StoreResult<Paged<GatewayServerRow>> {
        let sql = ListSql {
            columns: COLUMNS,
            from: "gateway_servers",
            filter: "LOWER(name || ' ' || url || ' ' || prefix || ' ' || auth_kind || ' ' || COALESCE(provider, '')) \
                     LIKE {q} ESCAPE '\\'",
            indexed: None,
            chosen: None,
            order: "name",
            after: "name > {i}",
        };
        let key = |s: &RawGatewayServer| Cursor::new(0, s.name.clone());
        self.paged(sql, search, None, window, key).await?.try_map(GatewayServerRow::try_from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::migrated_for_tests as store;

    fn row(name: &str, auth: GatewayAuth) -> GatewayServerRow {
        let name = ServerName::parse(name).unwrap();
        GatewayServerRow {
            id: format!("id-{name}"),
            prefix: name.default_prefix(),
            name,
            url: Url::parse("https://mcp.example/mcp").unwrap(),
            auth,
            created_at: 1,
            updated_at: 1,
        }
    }

    #[tokio::test]
    async fn every_auth_kind_round_trips_typed_and_names_and_prefixes_are_unique() {
        let (_dir, store) = store().await;
        let provider = GatewayAuth::Provider {
            provider: ProviderId::demo(),
            scopes: Scopes::parse(["profile"]).unwrap(),
            header: CredentialHeader::authorization(),
            scheme: CredentialScheme::bearer(),
        };
        let secret = GatewayAuth::SecretHeader {
            header: CredentialHeader::parse("X-Api-Key").unwrap(),
            secret_sealed: vec![1, 2, 3],
        };
        let settings = McpOauthSettings {
            resource: Url::parse("https://mcp.example/mcp").unwrap(),
            issuer: "https://as.example".into(),
            authorization_endpoint: Url::parse("https://as.example/authorize").unwrap(),
            token_endpoint: Url::parse("https://as.example/token").unwrap(),
            revocation_endpoint: None,
            scopes_supported: vec!["read".into()],
            registration: crate::providers::mcp_oauth::RegistrationKind::Dynamic,
            client_id: "client".into(),
            token_auth_method: crate::providers::mcp_oauth::StoredAuthMethod::ClientSecretBasic,
        };
        let oauth = GatewayAuth::McpOauth {
            provider: ProviderId::parse("mcp-e").unwrap(),
            scopes: Scopes::parse(["read"]).unwrap(),
            settings: Box::new(settings),
            secret_sealed: Some(vec![4, 5]),
        };
        let mut oauth_row = row("e", oauth);
        oauth_row.url = Url::parse("https://mcp.example/mcp").unwrap();
        let exchange = row("f", GatewayAuth::TokenExchange { service_id: "service-1".into() });
        let rows = [row("a", provider), row("b", GatewayAuth::None), row("c", secret), oauth_row, exchange];
        for r in &rows {
            store.create_gateway_server(r).await.unwrap();
        }
        assert_eq!(store.list_gateway_servers().await.unwrap(), rows.to_vec());
        let mut again = rows[1].clone();
        again.id = "other".into();
        assert!(matches!(store.create_gateway_server(&again).await, Err(StoreError::Conflict)), "same name");
        again.name = ServerName::parse("d").unwrap();
        assert!(matches!(store.create_gateway_server(&again).await, Err(StoreError::Conflict)), "same prefix");
        assert!(store.remove_gateway_server("b").await.unwrap());
        assert!(!store.remove_gateway_server("b").await.unwrap());
        assert!(store.gateway_server_by_name("b").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn nonsense_in_the_table_is_reported_as_corrupt() {
        let (_dir, store) = store().await;
        for (name, url, kind) in [
            ("Bad", "https://x.example/", "none"),
            ("b", "http://x.example/", "none"),
            ("c", "https://x.example/", "mcp-oauth"),
            ("e", "https://x.example/", "mcp_oauth"),
            ("d", "https://x.example/", "provider"),
            ("f", "https://x.example/", "token_exchange"),
        ] {
            sqlx::query(&format!(
                "INSERT INTO gateway_servers ({COLUMNS}) VALUES ($1, $1, $2, $1, $3, NULL, '', NULL, NULL, NULL, NULL, NULL, 1, 1)"
            ))
            .bind(name)
            .bind(url)
            .bind(kind)
            .execute(store.pool())
            .await
            .unwrap();
            assert!(matches!(store.gateway_server_by_name(name).await, Err(StoreError::Corrupt(_))), "{name}");
            sqlx::query("DELETE FROM gateway_servers").execute(store.pool()).await.unwrap();
        }
    }
}
