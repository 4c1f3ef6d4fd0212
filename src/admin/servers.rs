//! `admin servers …`: MCP servers behind the broker (gateway mode). Everything is
//! validated before anything is written, in the operator's words. A secret header's value is
//! read from standard input or from a named environment variable — never from the command
//! line, where `ps` and shell history would keep it — sealed at once, and never shown again.
//! Every change is audited without the secret. Running servers pick a change up through the
//! generation watcher (migration 0022's triggers), close a removed server's connections and
//! tell their clients that the tool list changed.

use anyhow::{Context, bail};
use clap::{Subcommand, ValueEnum};
use serde_json::{Value, json};
use url::Url;

use crate::domain::Scopes;
use crate::domain::gateway::{CredentialHeader, CredentialScheme, ServerName, ToolPrefix};
use crate::state::AppState;
use crate::store::StoreError;
use crate::store::gateway::ListSummary;
use crate::store::gateway::{GatewayAuth, GatewayServerRow, secret_seal_context};

/// The longest secret accepted (a header value, not a file).
use super::secret_input::SECRET_MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuthKind {
    /// Each user's token for a catalogue provider (--provider, --scopes).
    Provider,
    /// No credential.
    None,
    /// One secret for every user, in a header (--header; the value from stdin or --secret-env).
    SecretHeader,
    /// The server's own MCP authorization: discovered from its 401, the broker registered as a
    /// client there (or --client-id), each user's token from its authorization server.
    McpOauth,
    /// A short-lived token the broker mints per user for a registered token-API service
    /// (--service), which the server exchanges at /token with its own service credentials.
    TokenExchange,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant, reason = "parsed once per command line")]
pub enum ServersCommand {
    /// Put an MCP server behind the broker: its tools appear on /mcp under a prefix.
    Add {
        /// The server's name: 1-32 characters of a-z, 0-9 or '-'.
        name: String,
        /// Its MCP endpoint (Streamable HTTP): https, or http on 127.0.0.1, localhost or [::1].
        #[arg(long)]
        url: String,
        /// Put before each of its tool names (default: the name with '-' as '_', then '_').
        #[arg(long)]
        prefix: Option<String>,
        /// How each call is authorized.
        #[arg(long, value_enum)]
        auth: AuthKind,
        /// --auth provider: the configured provider whose token each user's calls carry.
        #[arg(long)]
        provider: Option<String>,
        /// --auth provider or mcp-oauth: scopes the token must carry, comma separated.
        #[arg(long, value_delimiter = ',')]
        scopes: Vec<String>,
        /// The header the credential goes in (provider: default Authorization; secret-header: required).
        #[arg(long)]
        header: Option<String>,
        /// --auth provider: the word before the token (default Bearer; "" for the bare token).
        #[arg(long)]
        scheme: Option<String>,
        /// --auth secret-header: read the secret from this environment variable instead of stdin.
        #[arg(long)]
        secret_env: Option<String>,
        /// --auth token-exchange: the registered service (`admin services add`) the server is.
        #[arg(long)]
        service: Option<String>,
        /// --auth mcp-oauth: a client id the operator registered at the server's authorization
        /// server (default: a client ID metadata document or dynamic registration).
        #[arg(long)]
        client_id: Option<String>,
        /// --auth mcp-oauth with --client-id: read its client secret from this environment variable.
        #[arg(long)]
        client_secret_env: Option<String>,
        /// --auth mcp-oauth with --client-id: read its client secret from standard input.
        #[arg(long)]
        client_secret_stdin: bool,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// List the servers behind the broker (never a secret).
    List {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Find an mcp-oauth server's authorization server again: new endpoints are taken as
    /// they are; a new authorization server gets a new registration of the broker, and the
    /// users' tokens from the old one are deleted (each user connects again on their next call).
    Rediscover {
        /// The server's name, as `servers list` shows it.
        name: String,
        /// When it moved to another authorization server: a client id the operator registered
        /// there (default: a client ID metadata document or dynamic registration).
        #[arg(long)]
        client_id: Option<String>,
        /// With --client-id: read its client secret from this environment variable.
        #[arg(long)]
        client_secret_env: Option<String>,
        /// With --client-id: read its client secret from standard input.
        #[arg(long)]
        client_secret_stdin: bool,
    },
    /// Take a server out: its tools disappear and its live connections end.
    Remove {
        /// The server's name, as `servers list` shows it.
        name: String,
    },
}

/// What `list` and `add` show of a server: never its secret.
fn describe(row: &GatewayServerRow) -> Value {
    let mut out = json!({
        "name": row.name.as_str(),
        "url": row.url.as_str(),
        "prefix": row.prefix.as_str(),
        "auth": row.auth.kind(),
        "created_at": row.created_at,
    });
    match &row.auth {
        GatewayAuth::Provider { provider, scopes, header, scheme } => {
            out["provider"] = provider.as_str().into();
            out["scopes"] = json!(scopes);
            out["header"] = header.as_str().into();
            out["scheme"] = scheme.as_str().into();
        }
        GatewayAuth::SecretHeader { header, .. } => out["header"] = header.as_str().into(),
        GatewayAuth::McpOauth { provider, scopes, settings, .. } => {
            out["provider"] = provider.as_str().into();
            out["scopes"] = json!(scopes);
            out["issuer"] = settings.issuer.as_str().into();
            out["resource"] = settings.resource.as_str().into();
            out["registration"] = settings.registration.as_str().into();
            out["client_id"] = settings.client_id.as_str().into();
        }
        GatewayAuth::TokenExchange { service_id } => out["service_id"] = service_id.as_str().into(),
        GatewayAuth::None => {}
    }
    out
}

/// What `list --json` shows of what the broker last read of a server's lists. A server that
/// acts as the user lists each user's own resources, read when they list and never kept:
/// `resources` is null and `resources_per_user` true.
fn describe_lists(lists: &ListSummary, server: &GatewayServerRow) -> Value {
    let per_user = server.auth.per_user();
    json!({
        "tools": lists.tools,
        "tools_changed_at": lists.tools_stored_at,
        "prompts": lists.prompts,
        "resources": if per_user { None } else { lists.resources },
        "resources_per_user": per_user,
        "resource_templates": lists.templates,
    })
}

/// Everything `add` was given, before it is checked.
pub struct AddArgs<'a> {
    pub name: &'a str,
    pub url: &'a str,
    pub prefix: Option<&'a str>,
    pub auth: AuthKind,
    pub provider: Option<&'a str>,
    pub scopes: &'a [String],
    pub header: Option<&'a str>,
    pub scheme: Option<&'a str>,
    pub secret_env: Option<&'a str>,
    pub service: Option<&'a str>,
    pub client_id: Option<&'a str>,
    pub client_secret_env: Option<&'a str>,
    pub client_secret_stdin: bool,
}

/// Checks every value of `add` and builds the row (the secret sealed), or says what is wrong.
/// `secret` is read only for `--auth secret-header`, and only after every other check passed.
pub async fn build_row(
    state: &AppState,
    args: AddArgs<'_>,
    secret: impl FnOnce(Option<&str>) -> anyhow::Result<String>,
) -> anyhow::Result<GatewayServerRow> {
    let name = ServerName::parse(args.name)?;
    let url = Url::parse(args.url).with_context(|| format!("--url {:?} is not an absolute URL", args.url))?;
    crate::net::check_upstream_url(&url).map_err(|why| anyhow::anyhow!("--url {why}"))?;
    let prefix = match args.prefix {
        Some(prefix) => ToolPrefix::parse(prefix)?,
        None => name.default_prefix(),
    };
    let only = |flag: &str, given: bool, kinds: &str| -> anyhow::Result<()> {
        if given { bail!("{flag} goes only with {kinds}") } else { Ok(()) }
    };
    if args.auth != AuthKind::Provider {
        only("--provider", args.provider.is_some(), "--auth provider")?;
        only("--scheme", args.scheme.is_some(), "--auth provider")?;
    }
    if !matches!(args.auth, AuthKind::Provider | AuthKind::McpOauth) {
        only("--scopes", !args.scopes.is_empty(), "--auth provider or --auth mcp-oauth")?;
    }
    if args.auth != AuthKind::TokenExchange {
        only("--service", args.service.is_some(), "--auth token-exchange")?;
    }
    if args.auth != AuthKind::McpOauth {
        only("--client-id", args.client_id.is_some(), "--auth mcp-oauth")?;
    }
    if args.client_id.is_none() {
        only("--client-secret-env", args.client_secret_env.is_some(), "--client-id")?;
        only("--client-secret-stdin", args.client_secret_stdin, "--client-id")?;
    }
    if args.client_secret_env.is_some() && args.client_secret_stdin {
        bail!("--client-secret-env and --client-secret-stdin: choose one");
    }
    if args.auth != AuthKind::SecretHeader {
        only("--secret-env", args.secret_env.is_some(), "--auth secret-header")?;
    }
    if matches!(args.auth, AuthKind::None | AuthKind::McpOauth | AuthKind::TokenExchange) {
        only("--header", args.header.is_some(), "--auth provider or --auth secret-header")?;
    }
    check_free(state, &name, &prefix).await?;
    let id = uuid::Uuid::new_v4().simple().to_string();
    let auth = match args.auth {
        AuthKind::None => GatewayAuth::None,
        AuthKind::Provider => {
            let Some(asked) = args.provider else { bail!("--auth provider needs --provider ID") };
            // Unknown ids are refused naming the configured ones, as for services.
            let ids = super::services::parse_providers(&[asked.to_owned()], &state.core.providers)?;
            let Some(provider) = ids.iter().next().and_then(|id| state.core.providers.find(id.as_str())) else {
                bail!("--provider must name a configured provider");
            };
            let scopes = Scopes::parse(args.scopes.iter().map(|s| s.trim()))?;
            crate::providers::scopes::check(&provider, &scopes)?;
            let header =
                args.header.map(CredentialHeader::parse).transpose()?.unwrap_or_else(CredentialHeader::authorization);
            let scheme = args.scheme.map(CredentialScheme::parse).transpose()?.unwrap_or_else(CredentialScheme::bearer);
            GatewayAuth::Provider { provider: provider.id.clone(), scopes, header, scheme }
        }
        AuthKind::SecretHeader => {
            let Some(header) = args.header else { bail!("--auth secret-header needs --header NAME (e.g. X-Api-Key)") };
            let header = CredentialHeader::parse(header)?;
            let plaintext = secrecy::SecretString::from(secret(args.secret_env)?);
            let value = secrecy::ExposeSecret::expose_secret(&plaintext);
            if value.is_empty() {
                bail!("the secret is empty (give it on standard input or in the variable named by --secret-env)");
            }
            if value.len() > SECRET_MAX || http::HeaderValue::from_str(value).is_err() {
                bail!("the secret cannot be sent as a header value (at most {SECRET_MAX} visible ASCII characters)");
            }
            let secret_sealed = state.core.sealer.seal(value.as_bytes(), secret_seal_context(&id));
            GatewayAuth::SecretHeader { header, secret_sealed }
        }
        AuthKind::McpOauth => {
            let oauth = super::servers_oauth::OauthArgs {
                scopes: args.scopes,
                client_id: args.client_id,
                client_secret_env: args.client_secret_env,
                client_secret_stdin: args.client_secret_stdin,
            };
            super::servers_oauth::discover_and_register(state, &name, &url, &id, oauth, secret).await?
        }
        AuthKind::TokenExchange => token_exchange(state, args.service).await?,
    };
    // Checked again: discovery took a while, and another operator may have added one meanwhile.
    check_free(state, &name, &prefix).await?;
    let now = state.core.now();
    Ok(GatewayServerRow { id, name, url, prefix, auth, created_at: now, updated_at: now })
}

/// `--auth token-exchange`: the named service, which must exist and have a resource (the
/// audience of the tokens minted for it), and must not be the broker's own audience.
async fn token_exchange(state: &AppState, service: Option<&str>) -> anyhow::Result<GatewayAuth> {
    let Some(name) = service else {
        bail!("--auth token-exchange needs --service NAME (a service registered with `admin services add`)")
    };
    let name = crate::store::token_api::ServiceRow::name_of_client_id(name);
    let Some(service) = state.core.store.services().by_name(name).await? else {
        let known: Vec<String> = state.core.store.services().list().await?.into_iter().map(|s| s.name).collect();
        if known.is_empty() {
            bail!("--service {name}: no such service, and none is registered (add one with `admin services add`)");
        }
        bail!("--service {name}: no such service; registered: {}", known.join(", "));
    };
    let Some(resource) = &service.resource else {
        bail!(
            "--service {name} has no registered resource, so no token can be minted for it; register it again with \
             --resource (the tool server's MCP URL)"
        );
    };
    if crate::identity::bearer::is_own_audience(&state.identity, resource.as_str()) {
        bail!("--service {name}'s resource is the broker's own audience; a token minted for it would open /mcp");
    }
    if state.identity.oidc.is_some() {
        bail!("--auth token-exchange needs identity mode local: the broker mints its tokens for local accounts");
    }
    Ok(GatewayAuth::TokenExchange { service_id: service.id })
}

/// Refuses a name that is taken or a prefix that overlaps another server's.
async fn check_free(state: &AppState, name: &ServerName, prefix: &ToolPrefix) -> anyhow::Result<()> {
    for other in state.core.store.gateway_servers().list().await? {
        if other.name == *name {
            bail!("a server named {name} already exists (remove it first to change it)");
        }
        if other.prefix.overlaps(prefix) {
            bail!(
                "--prefix {prefix} overlaps server {}'s prefix {}: one begins the other, so their tool names \
                 could collide; choose another with --prefix",
                other.name,
                other.prefix
            );
        }
    }
    Ok(())
}

/// The secret header's value, from `--secret-env` or standard input.
pub fn read_secret(env: Option<&str>) -> anyhow::Result<String> {
    super::secret_input::read(env, "--secret-env")
}

pub async fn run_servers(state: &AppState, command: ServersCommand) -> anyhow::Result<()> {
    match command {
        ServersCommand::Add {
            name,
            url,
            prefix,
            auth,
            provider,
            scopes,
            header,
            scheme,
            secret_env,
            service,
            client_id,
            client_secret_env,
            client_secret_stdin,
            json,
        } => {
            let args = AddArgs {
                name: &name,
                url: &url,
                prefix: prefix.as_deref(),
                auth,
                provider: provider.as_deref(),
                scopes: &scopes,
                header: header.as_deref(),
                scheme: scheme.as_deref(),
                secret_env: secret_env.as_deref(),
                service: service.as_deref(),
                client_id: client_id.as_deref(),
                client_secret_env: client_secret_env.as_deref(),
                client_secret_stdin,
            };
            let row = build_row(state, args, read_secret).await?;
            match state.core.store.gateway_servers().create(&row).await {
                Ok(()) => {}
                Err(StoreError::Conflict) => {
                    bail!("a server named {name} or with prefix {} already exists", row.prefix)
                }
                Err(e) => return Err(e.into()),
            }
            let mut detail =
                format!("server={} url={} prefix={} auth={}", row.name, row.url, row.prefix, row.auth.kind());
            if let GatewayAuth::TokenExchange { service_id } = &row.auth {
                detail.push_str(&format!(" service_id={service_id}"));
            }
            let provider = row.auth.user_credential().map(|(provider, ..)| provider.as_str());
            state
                .core
                .store
                .audit()
                .record_implied(row.created_at, None, "gateway_server.added", provider, Some(&detail))
                .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&describe(&row))?);
            } else {
                println!("added server {} ({}): its tools are listed as {}<tool>", row.name, row.url, row.prefix);
            }
            Ok(())
        }
        ServersCommand::List { json } => {
            let servers = state.core.store.gateway_servers().list().await?;
            let stored = state.core.store.gateway_lists().all().await?;
            if json {
                let described: Vec<Value> = servers
                    .iter()
                    .map(|s| {
                        let mut out = describe(s);
                        out["lists"] = describe_lists(&ListSummary::of(&s.id, &stored), s);
                        out
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&described)?);
            } else {
                let rows: Vec<Vec<String>> = servers
                    .iter()
                    .map(|s| {
                        let provider = s.auth.user_credential().map_or("-", |(provider, ..)| provider.as_str());
                        vec![
                            s.name.to_string(),
                            s.prefix.to_string(),
                            s.auth.kind().to_owned(),
                            provider.to_owned(),
                            // `unknown` until a user connects (its connect tool is listed meanwhile).
                            ListSummary::of(&s.id, &stored)
                                .tools
                                .map_or_else(|| "unknown".to_owned(), |n| n.to_string()),
                            s.url.to_string(),
                        ]
                    })
                    .collect();
                print!("{}", super::display::table(&["NAME", "PREFIX", "AUTH", "PROVIDER", "TOOLS", "URL"], &rows));
            }
            Ok(())
        }
        ServersCommand::Rediscover { name, client_id, client_secret_env, client_secret_stdin } => {
            let Some(server) = state.core.store.gateway_servers().by_name(&name).await? else {
                bail!("no server named {name}");
            };
            if client_id.is_none() && (client_secret_env.is_some() || client_secret_stdin) {
                bail!("--client-secret-env and --client-secret-stdin go only with --client-id");
            }
            let args = super::servers_oauth::OauthArgs {
                scopes: &[],
                client_id: client_id.as_deref(),
                client_secret_env: client_secret_env.as_deref(),
                client_secret_stdin,
            };
            rediscover(state, &server, args).await
        }
        ServersCommand::Remove { name } => {
            if !state.core.store.gateway_servers().remove(&name).await? {
                bail!("no server named {name}");
            }
            let detail = format!("server={name}");
            state
                .core
                .store
                .audit()
                .record_implied(state.core.now(), None, "gateway_server.removed", None, Some(&detail))
                .await?;
            println!("removed server {name}; running brokers close its connections within a second");
            Ok(())
        }
    }
}

/// `servers rediscover`: what changed is written, audited and said; nothing is written when
/// nothing changed.
async fn rediscover(
    state: &AppState,
    server: &GatewayServerRow,
    args: super::servers_oauth::OauthArgs<'_>,
) -> anyhow::Result<()> {
    use super::servers_oauth::Rediscovered;
    let name = &server.name;
    let (auth, mut detail, mut said, moved) = match super::servers_oauth::rediscover(state, server, args, read_secret)
        .await?
    {
        Rediscovered::Unchanged { issuer } => {
            println!("server {name}: its authorization server {issuer} has not changed; nothing to do");
            return Ok(());
        }
        Rediscovered::Endpoints { auth, changed } => {
            let changed = changed.join(",");
            let detail = format!("server={name} changed={changed}");
            let said = format!(
                "server {name}: its authorization server changed {changed}; the broker's registration and the users' \
                 connections stand"
            );
            (auth, detail, said, false)
        }
        Rediscovered::Moved { auth, from } => {
            let GatewayAuth::McpOauth { settings, .. } = &auth else { unreachable!("rediscover keeps the kind") };
            let detail = format!(
                "server={name} from={from} to={} registration={}",
                settings.issuer,
                settings.registration.as_str()
            );
            let said = format!(
                "server {name}: its authorization server moved from {from} to {}; the broker is registered there \
                 ({})",
                settings.issuer,
                settings.registration.as_str()
            );
            (auth, detail, said, true)
        }
    };
    let now = state.core.now();
    if !state.core.store.gateway_servers().update_oauth(&server.id, &auth, now).await? {
        bail!("the server {name} was removed meanwhile");
    }
    let provider = auth.user_credential().map(|(provider, ..)| provider.as_str());
    if moved && let Some(provider) = provider {
        // Tokens of the old authorization server: no use at the new one, and no longer trusted.
        let deleted = state.core.store.grants().delete_all_at(provider).await?;
        detail.push_str(&format!(" connections_deleted={deleted}"));
        said.push_str(&format!(
            "; {deleted} user connection(s) made through the old one were deleted, and each user connects again on \
             their next call"
        ));
    }
    state.core.store.audit().record_implied(now, None, "gateway_server.rediscovered", provider, Some(&detail)).await?;
    println!("{said}; running brokers use it within a second");
    Ok(())
}
