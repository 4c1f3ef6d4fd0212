//! `admin servers add --auth mcp-oauth`: discovers the server's authorization server and
//! registers the broker there ([`crate::providers::mcp_oauth`]), before anything is written.
//! The registration happens last, after every local check, so a refused command leaves no
//! client behind at the authorization server. An operator's client secret is read from a named
//! environment variable or standard input, never the command line, and sealed at once.
//!
//! `admin servers rediscover` finds a registered server's authorization server again, for a
//! server that moved to another one or whose authorization server moved its endpoints.

use anyhow::{Context, bail};
use secrecy::SecretString;
use url::Url;

use crate::domain::ProviderId;
use crate::domain::Scopes;
use crate::domain::gateway::ServerName;
use crate::providers::mcp_oauth::discovery::Discovered;
use crate::providers::mcp_oauth::registration::{self, BrokerClient};
use crate::providers::mcp_oauth::{McpOauthSettings, client_name, discovery, metadata_document_path, provider_id};
use crate::state::AppState;
use crate::store::gateway::{GatewayAuth, GatewayServerRow, secret_seal_context};

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
    if state.core.providers.get(&provider).is_some() {
        bail!(
            "a configured provider is named {provider}, which this server's tokens would be kept under; choose another name"
        );
    }
    let scopes = Scopes::parse(args.scopes.iter().map(|s| s.trim()))?;
    let client_secret = client_secret(&args, secret)?;
    let found = discovery::discover(&state.core.http, url)
        .await
        .with_context(|| format!("discovering the authorization server of {url}"))?;
    let (settings, secret_sealed) = register(state, &provider, id, found, args.client_id, client_secret).await?;
    Ok(GatewayAuth::McpOauth { provider, scopes, settings: Box::new(settings), secret_sealed })
}

/// The operator's client secret (with `--client-id`), read from where they said and checked.
fn client_secret(
    args: &OauthArgs<'_>,
    secret: impl FnOnce(Option<&str>) -> anyhow::Result<String>,
) -> anyhow::Result<Option<SecretString>> {
    let client_secret = match (args.client_id, args.client_secret_env, args.client_secret_stdin) {
        (Some(_), Some(var), _) => Some(secret(Some(var))?),
        (Some(_), None, true) => Some(secret(None)?),
        _ => None,
    }
    .map(SecretString::from);
    if let Some(secret) = &client_secret {
        registration::check_secret(secret)?;
    }
    Ok(client_secret)
}

/// The broker as a client of the authorization server `found` names — the operator's client,
/// or one registered now — as stored with server `id`: its settings and its sealed secret.
async fn register(
    state: &AppState,
    provider: &ProviderId,
    id: &str,
    found: Discovered,
    client_id: Option<&str>,
    client_secret: Option<SecretString>,
) -> anyhow::Result<(McpOauthSettings, Option<Vec<u8>>)> {
    let registered = match client_id {
        Some(client_id) => {
            if client_id.is_empty() || client_id.len() > 512 || client_id.chars().any(char::is_control) {
                bail!("--client-id is empty, too long or has control characters");
            }
            registration::operator(&found, client_id.to_owned(), client_secret)
        }
        None => {
            let https = state.core.config.public_url.scheme() == "https";
            let client = BrokerClient {
                client_name: client_name(&state.core.config.public_url),
                redirect_uri: state.core.config.provider_redirect_uri(provider),
                metadata_document: https.then(|| state.core.config.url(&metadata_document_path(provider))),
            };
            registration::automatic(&state.core.http, &found, &client)
                .await
                .with_context(|| format!("registering the broker at {}", found.issuer))?
        }
    };
    let secret_sealed = registered.client_secret.as_ref().map(|secret| {
        state.core.sealer.seal(secrecy::ExposeSecret::expose_secret(secret).as_bytes(), secret_seal_context(id))
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
    Ok((settings, secret_sealed))
}

/// What `servers rediscover` found for an `mcp-oauth` server.
pub enum Rediscovered {
    /// The same authorization server, at the same endpoints: nothing to write.
    Unchanged { issuer: String },
    /// The same authorization server (same issuer), with endpoints or scopes of its own
    /// changed: the broker's registration there stands, and so do the users' tokens.
    Endpoints { auth: GatewayAuth, changed: Vec<&'static str> },
    /// Another authorization server: the broker registered there; tokens from `from` are of no
    /// use any more.
    Moved { auth: GatewayAuth, from: String },
}

/// Finds `server`'s authorization server again (RFC 9728, then RFC 8414 / OIDC), as `add`
/// does, and says what changed. A new issuer gets a new registration (`args`, as for `add`); an
/// unchanged one keeps the broker's registration, so `--client-id` is refused then.
pub async fn rediscover(
    state: &AppState,
    server: &GatewayServerRow,
    args: OauthArgs<'_>,
    secret: impl FnOnce(Option<&str>) -> anyhow::Result<String>,
) -> anyhow::Result<Rediscovered> {
    let GatewayAuth::McpOauth { provider, scopes, settings, secret_sealed } = &server.auth else {
        bail!("the server {} is not an mcp-oauth server: it has no authorization server to find", server.name);
    };
    let found = discovery::discover(&state.core.http, &server.url)
        .await
        .with_context(|| format!("discovering the authorization server of {}", server.url))?;
    if found.issuer != settings.issuer {
        let client_secret = client_secret(&args, secret)?;
        let from = settings.issuer.clone();
        let (settings, secret_sealed) =
            register(state, provider, &server.id, found, args.client_id, client_secret).await?;
        let auth = GatewayAuth::McpOauth {
            provider: provider.clone(),
            scopes: scopes.clone(),
            settings: Box::new(settings),
            secret_sealed,
        };
        return Ok(Rediscovered::Moved { auth, from });
    }
    if args.client_id.is_some() {
        bail!(
            "the authorization server of {} has not moved ({}), so the broker's registration there is kept; to \
             register it with another client, remove the server and add it again",
            server.name,
            settings.issuer
        );
    }
    let (renewed, changed) = renewed(settings, found);
    if changed.is_empty() {
        return Ok(Rediscovered::Unchanged { issuer: renewed.issuer });
    }
    let auth = GatewayAuth::McpOauth {
        provider: provider.clone(),
        scopes: scopes.clone(),
        settings: Box::new(renewed),
        secret_sealed: secret_sealed.clone(),
    };
    Ok(Rediscovered::Endpoints { auth, changed })
}

/// `settings` with what the same authorization server's metadata now says (`found`), and the
/// names of the fields that changed. The registration (client id, how it authenticates) stays.
fn renewed(settings: &McpOauthSettings, found: Discovered) -> (McpOauthSettings, Vec<&'static str>) {
    let mut renewed = settings.clone();
    renewed.resource = found.resource;
    renewed.authorization_endpoint = found.authorization_endpoint;
    renewed.token_endpoint = found.token_endpoint;
    renewed.revocation_endpoint = found.revocation_endpoint;
    renewed.scopes_supported = found.scopes_supported;
    let changed = [
        ("resource", renewed.resource != settings.resource),
        ("authorization_endpoint", renewed.authorization_endpoint != settings.authorization_endpoint),
        ("token_endpoint", renewed.token_endpoint != settings.token_endpoint),
        ("revocation_endpoint", renewed.revocation_endpoint != settings.revocation_endpoint),
        ("scopes_supported", renewed.scopes_supported != settings.scopes_supported),
    ]
    .into_iter()
    .filter_map(|(field, differs)| differs.then_some(field))
    .collect();
    (renewed, changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::mcp_oauth::{RegistrationKind, StoredAuthMethod};

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    fn settings() -> McpOauthSettings {
        McpOauthSettings {
            resource: url("https://crm.example/mcp"),
            issuer: "https://auth.example".into(),
            authorization_endpoint: url("https://auth.example/authorize"),
            token_endpoint: url("https://auth.example/token"),
            revocation_endpoint: None,
            scopes_supported: vec!["read".into()],
            registration: RegistrationKind::Dynamic,
            client_id: "client-1".into(),
            token_auth_method: StoredAuthMethod::ClientSecretBasic,
        }
    }

    fn found(settings: &McpOauthSettings) -> Discovered {
        Discovered {
            resource: settings.resource.clone(),
            issuer: settings.issuer.clone(),
            authorization_endpoint: settings.authorization_endpoint.clone(),
            token_endpoint: settings.token_endpoint.clone(),
            revocation_endpoint: settings.revocation_endpoint.clone(),
            registration_endpoint: Some(url("https://auth.example/register")),
            metadata_documents: false,
            token_auth_methods: vec!["client_secret_basic".into()],
            scopes_supported: settings.scopes_supported.clone(),
        }
    }

    #[test]
    fn the_same_authorization_server_keeps_the_registration_and_takes_its_new_endpoints() {
        let before = settings();
        let (same, changed) = renewed(&before, found(&before));
        assert_eq!((same, changed), (before.clone(), vec![]), "nothing moved: nothing changes");

        let mut moved = found(&before);
        moved.token_endpoint = url("https://auth.example/v2/token");
        moved.revocation_endpoint = Some(url("https://auth.example/v2/revoke"));
        let (after, changed) = renewed(&before, moved);
        assert_eq!(changed, ["token_endpoint", "revocation_endpoint"]);
        assert_eq!(after.token_endpoint.as_str(), "https://auth.example/v2/token");
        assert_eq!(
            (after.client_id.as_str(), after.registration, after.token_auth_method),
            ("client-1", RegistrationKind::Dynamic, StoredAuthMethod::ClientSecretBasic),
            "the broker's registration there stands"
        );
    }
}
