//! `admin servers add --auth mcp-oauth`: discovers the server's authorization server and
//! registers the broker there ([`crate::providers::mcp_oauth`]), before anything is written.
//! The registration happens last, after every local check, so a refused command leaves no
//! client behind at the authorization server. An operator's client secret is read from a named
//! environment variable or standard input, never the command line, and sealed at once.

use anyhow::{Context, bail};
use secrecy::SecretString;
use url::Url;

use crate::domain::Scopes;
use crate::domain::gateway::ServerName;
use crate::providers::mcp_oauth::registration::{self, BrokerClient};
use crate::providers::mcp_oauth::{McpOauthSettings, client_name, discovery, metadata_document_path, provider_id};
use crate::state::AppState;
use crate::store::gateway_servers::{GatewayAuth, secret_seal_context};

/// What `add` was given for an `mcp-oauth` server.
pub struct OauthArgs<'a> {
    pub scopes: &'a [String],
    pub client_id: Option<&'a str>,
    pub client_secret_env: Option<&'a str>,
    pub client_secret_stdin: bool,
}

pub async fn discover_and_register(
    state: &AppState,
    name: &ServerName,
    url: &Url,
    id: &str,
    args: OauthArgs<'_>,
    secret: impl FnOnce(Option<&str>) -> anyhow::Result<String>,
) -> anyhow::Result<GatewayAuth> {
    let provider = provider_id(name);
    // The admin CLI holds only the configured providers (no server's), so any match is one.
    if state.providers.get(&provider).is_some() {
        bail!(
            "a configured provider is named {provider}, which this server's tokens would be kept under; choose another name"
        );
    }
    let scopes = Scopes::parse(args.scopes.iter().map(|s| s.trim()))?;
    let client_secret = match (args.client_id, args.client_secret_env, args.client_secret_stdin) {
        (Some(_), Some(var), _) => Some(secret(Some(var))?),
        (Some(_), None, true) => Some(secret(None)?),
        _ => None,
    }
    .map(SecretString::from);
    if let Some(secret) = &client_secret {
        registration::check_secret(secret)?;
    }
    let found = discovery::discover(&state.http, url)
        .await
        .with_context(|| format!("discovering the authorization server of {url}"))?;
    let registered = match args.client_id {
        Some(client_id) => {
            if client_id.is_empty() || client_id.len() > 512 || client_id.chars().any(char::is_control) {
                bail!("--client-id is empty, too long or has control characters");
            }
            registration::operator(&found, client_id.to_owned(), client_secret)
        }
        None => {
            let https = state.config.public_url.scheme() == "https";
            let client = BrokerClient {
                client_name: client_name(&state.config.public_url),
                redirect_uri: state.config.provider_redirect_uri(&provider),
                metadata_document: https.then(|| state.config.url(&metadata_document_path(&provider))),
            };
            registration::automatic(&state.http, &found, &client)
                .await
                .with_context(|| format!("registering the broker at {}", found.issuer))?
        }
    };
    let secret_sealed = registered.client_secret.as_ref().map(|secret| {
        state.sealer.seal(secrecy::ExposeSecret::expose_secret(secret).as_bytes(), secret_seal_context(id))
    });
    let settings = McpOauthSettings {
        resource: found.resource,
        issuer: found.issuer,
        authorization_endpoint: found.authorization_endpoint,
        token_endpoint: found.token_endpoint,
        revocation_endpoint: found.revocation_endpoint,
        scopes_supported: found.scopes_supported,
        registration: registered.kind,
        client_id: registered.client_id,
        token_auth_method: registered.auth_method,
    };
    Ok(GatewayAuth::McpOauth { provider, scopes, settings: Box::new(settings), secret_sealed })
}
