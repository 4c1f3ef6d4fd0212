//! What the broker stores about a server's authorization server ([`McpOauthSettings`]: the
//! endpoints discovery found, and how the broker is registered there), and the provider entry
//! `mcp-<name>` it becomes.

use std::collections::BTreeMap;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use url::Url;

use crate::domain::gateway::ServerName;
use crate::domain::{ProviderId, Scopes};
use crate::providers::provider::{ProviderConfig, TokenAuthMethod};

/// How the broker is registered at the server's authorization server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RegistrationKind {
    /// The `client_id` is the URL of a document the broker serves.
    MetadataDocument,
    /// RFC 7591: the authorization server issued the `client_id` (and maybe a secret).
    Dynamic,
    /// The operator gave the `client_id` (and maybe a secret).
    Operator,
}

impl RegistrationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RegistrationKind::MetadataDocument => "metadata_document",
            RegistrationKind::Dynamic => "dynamic",
            RegistrationKind::Operator => "operator",
        }
    }
}

/// What discovery and registration found, as stored with the server (JSON in
/// `gateway_servers.oauth`, migration 0029). The client secret, if any, is sealed beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpOauthSettings {
    /// The server's canonical URL (RFC 9728 `resource`): the RFC 8707 `resource` of every
    /// authorization, so the tokens are for this server only.
    pub resource: Url,
    /// The authorization server's issuer, exactly as its metadata states it.
    pub issuer: String,
    pub authorization_endpoint: Url,
    pub token_endpoint: Url,
    pub revocation_endpoint: Option<Url>,
    /// The scopes the server or its authorization server advertise (shown on consent; others
    /// are not refused, as `open_scopes`).
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    pub registration: RegistrationKind,
    pub client_id: String,
    pub token_auth_method: StoredAuthMethod,
}

/// [`TokenAuthMethod`], as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoredAuthMethod {
    None,
    ClientSecretBasic,
    ClientSecretPost,
}

impl From<StoredAuthMethod> for TokenAuthMethod {
    fn from(method: StoredAuthMethod) -> Self {
        match method {
            StoredAuthMethod::None => TokenAuthMethod::None,
            StoredAuthMethod::ClientSecretBasic => TokenAuthMethod::ClientSecretBasic,
            StoredAuthMethod::ClientSecretPost => TokenAuthMethod::ClientSecretPost,
        }
    }
}

/// The provider id a server's tokens are kept under: `mcp-<name>`.
pub fn provider_id(server: &ServerName) -> ProviderId {
    // Server names are `[a-z0-9-]{1,32}`, so this always parses; the fallback is unreachable.
    ProviderId::parse(&format!("mcp-{server}")).unwrap_or_else(|_| ProviderId::demo())
}

/// How the broker names itself when it registers (the authorization server's consent page
/// shows it).
pub fn client_name(public_url: &Url) -> String {
    format!("oauth-broker at {}", public_url.host_str().unwrap_or("localhost"))
}

/// Where the broker serves the client ID metadata document of `provider`, under its public URL.
pub fn metadata_document_path(provider: &ProviderId) -> String {
    format!("/oauth/client-metadata/{provider}")
}

impl McpOauthSettings {
    /// Whether every stored URL still obeys the broker's outbound rules (a row edited by hand
    /// is refused as corrupt).
    pub fn check(&self) -> Result<(), &'static str> {
        for url in [&self.resource, &self.authorization_endpoint, &self.token_endpoint]
            .into_iter()
            .chain(self.revocation_endpoint.as_ref())
        {
            crate::net::check_upstream_url(url)?;
        }
        if self.client_id.is_empty() {
            return Err("no client_id");
        }
        Ok(())
    }

    /// The provider entry of server `name`: the server's authorization server as a provider.
    pub fn provider(&self, name: &ServerName, client_secret: Option<SecretString>) -> ProviderConfig {
        let scopes_supported: BTreeMap<String, String> =
            self.scopes_supported.iter().map(|s| (s.clone(), String::new())).collect();
        ProviderConfig {
            id: provider_id(name),
            display_name: format!("MCP server {name}"),
            authorization_url: self.authorization_endpoint.clone(),
            token_url: self.token_endpoint.clone(),
            client_id: self.client_id.clone(),
            client_secret,
            default_scopes: Scopes::default(),
            // Never called: the server is reached through the gateway, not `provider_request`.
            api_base_url: self.resource.clone(),
            revocation_url: self.revocation_endpoint.clone(),
            userinfo_url: None,
            token_auth_method: self.token_auth_method.into(),
            // RFC 8707 §2.1: the token is for this server alone (MCP basic/authorization
            // §Resource Parameter Implementation).
            extra_authorize_params: BTreeMap::from([("resource".to_owned(), self.resource.to_string())]),
            issuer: None,
            scope_descriptions: scopes_supported,
            refresh_url: None,
            scope_separator: " ".into(),
            scope_param: "scope".into(),
            pkce_required: true,
            open_scopes: true,
            scope_aliases: BTreeMap::new(),
            scopes_not_returned: Scopes::default(),
            account_id_field: None,
            account_label_field: None,
            token_path: None,
            api_base_from_token: None,
            api_base_domains: Vec::new(),
            user_agent: None,
            api_headers: Vec::new(),
            refresh_margin: None,
            catalogue: None,
            api_key: None,
            shared_with_organizations: true,
            source: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> McpOauthSettings {
        McpOauthSettings {
            resource: Url::parse("https://mcp.example/mcp").unwrap(),
            issuer: "https://as.example".into(),
            authorization_endpoint: Url::parse("https://as.example/authorize").unwrap(),
            token_endpoint: Url::parse("https://as.example/token").unwrap(),
            revocation_endpoint: Some(Url::parse("https://as.example/revoke").unwrap()),
            scopes_supported: vec!["read".into()],
            registration: RegistrationKind::Dynamic,
            client_id: "abc".into(),
            token_auth_method: StoredAuthMethod::None,
        }
    }

    #[test]
    fn a_server_becomes_a_provider_whose_authorizations_name_the_server_as_resource() {
        let name = ServerName::parse("notes").unwrap();
        let provider = settings().provider(&name, None);
        assert_eq!(provider.id.as_str(), "mcp-notes");
        assert_eq!(provider.extra_authorize_params["resource"], "https://mcp.example/mcp");
        assert_eq!(provider.token_auth_method, TokenAuthMethod::None);
        assert!(provider.pkce_required && provider.revocation_url.is_some());
        let stored = serde_json::to_string(&settings()).unwrap();
        assert_eq!(serde_json::from_str::<McpOauthSettings>(&stored).unwrap(), settings());
    }

    #[test]
    fn stored_urls_are_held_to_the_outbound_rules() {
        let mut bad = settings();
        bad.token_endpoint = Url::parse("http://as.example/token").unwrap();
        assert!(bad.check().is_err());
        assert!(settings().check().is_ok());
    }
}
