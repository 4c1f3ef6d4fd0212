//! Settings for every subcommand, from (highest first) command-line flags, `OAUTH_BROKER_*`
//! environment variables, the TOML file named by `--config`, then defaults. `serve`, `migrate`
//! and `admin` read the same settings, so they find the same database and keys.

pub mod gateway;
pub mod token_api;
pub mod webhooks;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use secrecy::SecretString;
use serde::Deserialize;
use url::Url;

pub use crate::clock::parse_duration;
use crate::domain::ProviderId;
use crate::net::is_loopback;
// A provider's settings are the provider module's types; the settings file names them.
pub use crate::providers::provider::{MAX_REFRESH_MARGIN, ProviderConfig, TokenAuthMethod};

/// Flags shared by every subcommand (each also read from `OAUTH_BROKER_<NAME>`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SettingsArgs {
    /// TOML configuration file.
    #[arg(long, env = "OAUTH_BROKER_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Address to listen on, IP:PORT or HOST:PORT [default: 127.0.0.1:8080].
    #[arg(long, env = "OAUTH_BROKER_LISTEN", global = true, value_parser = parse_listen)]
    pub listen: Option<SocketAddr>,
    /// URL users and clients reach the broker at; the MCP endpoint is `{public_url}/mcp`
    /// [default: http://{listen}].
    #[arg(long, env = "OAUTH_BROKER_PUBLIC_URL", global = true, value_parser = parse_public_url)]
    pub public_url: Option<Url>,
    /// `sqlite://…` or `postgres://…` [default: sqlite in the data dir].
    // Its value can hold a password, which `--help` would otherwise print.
    #[arg(long, env = "OAUTH_BROKER_DATABASE_URL", global = true, hide_env_values = true)]
    pub database_url: Option<String>,
    /// Directory for the SQLite database and the generated encryption key [default: ./data].
    #[arg(long, env = "OAUTH_BROKER_DATA_DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// Serve the built-in demo provider (`demo`) and create a demo user on first start.
    #[arg(long, env = "OAUTH_BROKER_DEMO", global = true)]
    pub demo: bool,
    /// Serve /metrics on this address only (IP:PORT) [default: main listener, metrics_token].
    #[arg(long, env = "OAUTH_BROKER_METRICS_LISTEN", global = true, value_name = "ADDR", value_parser = parse_listen)]
    pub metrics_listen: Option<SocketAddr>,
    /// Log format: text or json (one object per line) [default: text].
    #[arg(long, env = "OAUTH_BROKER_LOG_FORMAT", global = true, value_name = "FORMAT", value_parser = LogFormat::parse)]
    pub log_format: Option<LogFormat>,
}

/// How log lines are written (`--log-format`, `log_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl LogFormat {
    pub fn parse(value: &str) -> Result<LogFormat, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!("{value:?} is not a log format: give text or json")),
        }
    }

    /// The format the flag or environment gives, else the config file's `log_format`, read
    /// before anything else so even the first lines are in it. A file that cannot be read or
    /// parsed gives `text` here and is reported by [`Config::load`].
    pub fn of(args: &SettingsArgs) -> Result<LogFormat, String> {
        if let Some(format) = args.log_format {
            return Ok(format);
        }
        let Some(path) = &args.config else { return Ok(LogFormat::Text) };
        let Ok(text) = std::fs::read_to_string(path) else { return Ok(LogFormat::Text) };
        match toml::from_str::<FileConfig>(&text) {
            Ok(FileConfig { log_format: Some(format), .. }) => {
                LogFormat::parse(&format).map_err(|e| format!("log_format: {e}"))
            }
            _ => Ok(LogFormat::Text),
        }
    }
}

/// `mcp_session_idle` when not set: a session with nothing open ends after this long without
/// a request.
pub const MCP_SESSION_IDLE: Duration = Duration::from_secs(300);
/// `mcp_session_park` when not set: a session with nothing in flight this long gives up its
/// rmcp service.
pub const MCP_SESSION_PARK: Duration = Duration::from_secs(10);
/// The shortest `mcp_session_park`.
pub const MCP_SESSION_PARK_AT_LEAST: Duration = Duration::from_secs(1);

/// `refresh_margin` when not set.
pub const DEFAULT_REFRESH_MARGIN: Duration = Duration::from_secs(60);
/// Operators' settings: where /metrics is served and who may read it.
#[derive(Debug, Clone, Default)]
pub struct OpsConfig {
    /// `metrics_listen`: /metrics on its own listener (and not on the main one).
    pub metrics_listen: Option<SocketAddr>,
    /// `metrics_token` (or `OAUTH_BROKER_METRICS_TOKEN`): on the main listener, /metrics
    /// answers only a request bearing it; without it (and without `metrics_listen`) /metrics
    /// is off there.
    pub metrics_token: Option<SecretString>,
    pub log_format: LogFormat,
}

/// The TOML file's shape. Every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    /// IP:PORT or HOST:PORT, as `--listen`.
    listen: Option<String>,
    /// Checked by [`parse_public_url`], which names what is wrong.
    public_url: Option<String>,
    database_url: Option<String>,
    data_dir: Option<PathBuf>,
    demo: Option<bool>,
    /// With `demo`: also the demo provider's API-key mode, as provider `demo-key`.
    demo_api_keys: Option<bool>,
    /// Base64 or hex, 32 bytes. Prefer `OAUTH_BROKER_ENCRYPTION_KEY`.
    encryption_key: Option<String>,
    /// Keys from before a rotation: they still open old values.
    #[serde(default)]
    retired_encryption_keys: Vec<String>,
    #[serde(default, with = "humantime_serde_opt")]
    authorization_ttl: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    connect_wait: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    mrtr_wait: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    progress_interval: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    shutdown_grace: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    mcp_session_idle: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    mcp_session_park: Option<Duration>,
    /// Directory of operator prompt templates (TOML or Markdown with front matter).
    prompts_dir: Option<PathBuf>,
    /// Page size of `prompts/list` (and the other paginated lists).
    page_size: Option<usize>,
    #[serde(default, with = "humantime_serde_opt")]
    database_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    refresh_lease: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    refresh_margin: Option<Duration>,
    refresh_attempts_per_minute: Option<u32>,
    #[serde(default, with = "humantime_serde_opt")]
    key_reload_interval: Option<Duration>,
    #[serde(default)]
    providers: BTreeMap<String, crate::providers::catalogue::ProviderFields>,
    #[serde(default)]
    identity: IdentityFile,
    /// As `--metrics-listen`.
    metrics_listen: Option<String>,
    /// Bearer token for /metrics on the main listener. Prefer `OAUTH_BROKER_METRICS_TOKEN`.
    metrics_token: Option<String>,
    /// `text` or `json`, as `--log-format`.
    log_format: Option<String>,
    /// Reverse proxies / load balancers (addresses or CIDR ranges) whose `X-Forwarded-For` is
    /// believed.
    #[serde(default)]
    trusted_proxies: Vec<String>,
    /// `[token_api]`: limits per service, shared by every instance.
    #[serde(default)]
    token_api: token_api::TokenApiFile,
    /// `[webhooks]`: delivery of events to services' webhooks.
    #[serde(default)]
    webhooks: webhooks::WebhooksFile,
    /// `[gateway]`: connections to the MCP servers behind the broker.
    #[serde(default)]
    gateway: gateway::GatewayFile,
    /// PostgreSQL: where the signal listener connects, when not `database_url`.
    signal_listener_url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct IdentityFile {
    mode: Option<IdentityMode>,
    issuer: Option<Url>,
    client_id: Option<String>,
    client_secret: Option<String>,
    client_secret_env: Option<String>,
    audience: Option<String>,
    #[serde(default)]
    scopes_supported: Vec<String>,
    #[serde(default)]
    required_scopes: Vec<String>,
    #[serde(default, with = "humantime_serde_opt")]
    leeway: Option<Duration>,
    #[serde(default)]
    algorithms: Vec<String>,
    admin_claim: Option<String>,
    admin_value: Option<String>,
}

/// Who vouches for users (DESIGN.md "Identity").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentityMode {
    /// Local accounts; the broker is its own authorization server.
    #[default]
    Local,
    /// An external OpenID Connect issuer (Keycloak, Okta, Entra ID, Auth0, Google…).
    Oidc,
}

/// `[identity]`: where bearer tokens and browser sign-ins come from.
#[derive(Debug, Clone)]
pub struct IdentityConfig {
    pub mode: IdentityMode,
    /// OIDC only: the issuer (its `/.well-known/openid-configuration` is discovered).
    pub issuer: Option<Url>,
    /// OIDC only: the broker's client at the issuer, for browser sign-in.
    pub client_id: Option<String>,
    pub client_secret: Option<SecretString>,
    /// Accepted `aud` of bearer tokens [default: the MCP endpoint URL].
    pub audience: Option<String>,
    /// Advertised in the protected-resource metadata.
    pub scopes_supported: Vec<String>,
    /// Scopes every /mcp token must carry (else 403 insufficient_scope).
    pub required_scopes: Vec<String>,
    /// Clock skew allowed on `exp`/`nbf`/`iat` [default: 60 s].
    pub leeway: Duration,
    /// JWS algorithms accepted from the issuer [default: RS256, PS256, ES256, EdDSA].
    pub algorithms: Vec<String>,
    /// OIDC only: (claim, value) — a user whose ID token's `claim` is `value` or a list holding
    /// it is an admin (`/admin`), decided afresh at each browser sign-in
    /// (`admin_claim = "groups"`, `admin_value = "broker-admins"`).
    pub admin_claim: Option<(String, String)>,
}

pub(crate) mod humantime_serde_opt {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|s| super::parse_duration(&s).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// `--public-url`, `public_url`: an absolute `http://` or `https://` URL. The common mistakes
/// get their own words: an address without a scheme (`127.0.0.1:8080`, which the URL parser
/// calls "relative URL without a base", and `localhost:8080`, which it reads as a URL of scheme
/// `localhost`).
pub fn parse_public_url(text: &str) -> Result<Url, String> {
    let text = text.trim();
    let no_scheme = || {
        format!(
            "{text:?} has no scheme: write the URL users and clients open, with http:// or https://, \
             e.g. http://{text} (or https://{text} behind TLS)"
        )
    };
    match Url::parse(text) {
        Ok(url) if url.scheme() == "http" || url.scheme() == "https" => {
            if url.host_str().is_none_or(str::is_empty) {
                return Err(format!("{text:?} names no host: write it as e.g. https://broker.example.com"));
            }
            Ok(url)
        }
        Ok(_) if !text.contains("://") => Err(no_scheme()),
        Ok(url) => Err(format!("{text:?} is not an http:// or https:// URL (its scheme is {:?})", url.scheme())),
        Err(url::ParseError::RelativeUrlWithoutBase) => Err(no_scheme()),
        Err(error) => Err(format!("{text:?} is not a URL ({error}): write it as e.g. https://broker.example.com")),
    }
}

/// Resolved settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// No trailing slash.
    pub public_url: Url,
    /// Whether `public_url` was given (flag, environment or file) rather than made from
    /// `listen`: commands that write it into identity data refuse to guess it
    /// ([`Config::require_public_url`]).
    pub public_url_given: bool,
    pub database_url: String,
    pub data_dir: PathBuf,
    pub demo: bool,
    /// With `demo`: the provider `demo-key`, whose users paste a key the demo provider issued
    /// (`demo_api_keys = true` in the file; [`crate::demo_provider::keys`]).
    pub demo_api_keys: bool,
    /// From `OAUTH_BROKER_ENCRYPTION_KEY` or the file; when absent a key is generated into
    /// `data_dir/encryption.key` on first start.
    pub encryption_key: Option<SecretString>,
    pub retired_encryption_keys: Vec<SecretString>,
    /// How long a connect link stays valid.
    pub authorization_ttl: Duration,
    /// How long `connect_account` holds the call open waiting for the browser flow.
    pub connect_wait: Duration,
    /// MCP 2026-07-28: how long a retry whose connect link is still open waits for the user
    /// before answering "still waiting" (`mrtr_wait`, default 30 s: half of the 60 s request
    /// timeout common clients use, so the answer comes before they give up).
    pub mrtr_wait: Duration,
    /// How often a waiting `connect_account` re-reads its authorization and sends progress
    /// (`progress_interval`, default 5 s).
    pub progress_interval: Duration,
    /// On SIGTERM, how long requests already running may take to finish before they are ended
    /// (`shutdown_grace`, default 20 s).
    pub shutdown_grace: Duration,
    /// An MCP session with nothing open (no listening GET stream, no request running, no
    /// authorization waiting for the user) ends after this long without a request, which
    /// returns its memory (`mcp_session_idle`, default 5 min, at least 10 s).
    pub mcp_session_idle: Duration,
    /// An MCP session with nothing in flight for this long gives up its rmcp service until its
    /// next message, keeping its streams and state (`mcp_session_park`, default 10 s, at least
    /// 1 s).
    pub mcp_session_park: Duration,
    /// Operator prompt templates, watched for changes [default: {data_dir}/prompts].
    pub prompts_dir: PathBuf,
    /// Items per page of `prompts/list`, `resources/list`, … [default: 50].
    pub page_size: usize,
    /// The bound on one database call, from waiting for a connection to the last row; a call
    /// that exceeds it fails as "temporarily unavailable" [default: 5 s].
    pub database_timeout: Duration,
    /// How long a refresh lease holds without being renewed: a holder that died (killed,
    /// lost its network) blocks others' refreshes of that grant at most this long; a live one
    /// renews it while it waits for the provider [default: 10 s].
    pub refresh_lease: Duration,
    /// A token is refreshed at most this long before it expires (less for short-lived ones: a
    /// tenth of their lifetime), so it does not expire in flight (`refresh_margin`, per provider
    /// too) [default: 60 s].
    pub refresh_margin: Duration,
    /// The most refresh requests one grant may send its provider per minute, on all instances
    /// together (`refresh_attempts_per_minute`) [default: 6].
    pub refresh_attempts_per_minute: u32,
    /// How often a running server reads its encryption keys (files) and signing keys (database)
    /// again, so `admin keys rotate` / `rotate-signing` reach it without a restart
    /// (`key_reload_interval`) [default: 30 s].
    pub key_reload_interval: Duration,
    pub identity: IdentityConfig,
    pub providers: BTreeMap<ProviderId, ProviderConfig>,
    /// Metrics and logs.
    pub ops: OpsConfig,
    /// Peers whose `X-Forwarded-For` names the client ([`crate::net::client_address`]); empty:
    /// the TCP peer is the client [default: none].
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The token API's limits per service (`[token_api]`, [`token_api`]; counted by
    /// `crate::identity::service_limits` and `crate::api::wait_slots`).
    pub token_api: token_api::TokenApiLimits,
    /// Webhook delivery (`[webhooks]`, [`webhooks`]; used by `crate::events::webhooks`).
    pub webhooks: webhooks::WebhookSettings,
    /// Connections to the MCP servers behind the broker (`[gateway]`, [`gateway`]).
    pub gateway: gateway::GatewaySettings,
    /// PostgreSQL: the URL the cross-instance signal listener (`LISTEN`) connects to
    /// [default: `database_url`]. Set it when `database_url` goes through a pooler in
    /// transaction mode (PgBouncer), which cannot hold a `LISTEN`: point it at PostgreSQL itself.
    pub signal_listener_url: Option<String>,
}

impl Config {
    /// Reads flags/env (already parsed by clap) and the optional TOML file.
    pub fn load(args: &SettingsArgs) -> anyhow::Result<Self> {
        let file = match &args.config {
            Some(path) => {
                let text =
                    std::fs::read_to_string(path).with_context(|| format!("reading config file {}", path.display()))?;
                toml::from_str::<FileConfig>(&text)
                    .with_context(|| format!("parsing config file {}", path.display()))?
            }
            None => FileConfig::default(),
        };
        let env_key = std::env::var("OAUTH_BROKER_ENCRYPTION_KEY").ok().filter(|k| !k.is_empty());
        Self::resolve(args, file, env_key)
    }

    /// Parses a TOML document as the config file (used by tests and `--config`).
    pub fn from_toml(args: &SettingsArgs, toml_text: &str) -> anyhow::Result<Self> {
        let file: FileConfig = toml::from_str(toml_text).context("parsing config")?;
        Self::resolve(args, file, None)
    }

    fn resolve(args: &SettingsArgs, file: FileConfig, env_key: Option<String>) -> anyhow::Result<Self> {
        let file_listen =
            file.listen.as_deref().map(parse_listen).transpose().map_err(|e| anyhow::anyhow!("listen: {e}"))?;
        let listen = args.listen.or(file_listen).unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080)));
        let data_dir = args.data_dir.clone().or(file.data_dir).unwrap_or_else(|| PathBuf::from("./data"));
        let data_dir_for_defaults = data_dir.clone();
        let file_public_url = file
            .public_url
            .as_deref()
            .map(parse_public_url)
            .transpose()
            .map_err(|e| anyhow::anyhow!("public_url: {e}"))?;
        let public_url_given = args.public_url.is_some() || file_public_url.is_some();
        let public_url = match args.public_url.clone().or(file_public_url) {
            Some(url) => url,
            None => default_public_url(listen)?,
        };
        let public_url = normalize_public_url(public_url)?;
        let database_url = args
            .database_url
            .clone()
            .or(file.database_url)
            .unwrap_or_else(|| format!("sqlite://{}?mode=rwc", data_dir.join("oauth-broker.db").display()));
        if !(database_url.starts_with("sqlite:")
            || database_url.starts_with("postgres:")
            || database_url.starts_with("postgresql:"))
        {
            bail!("database_url must start with sqlite:// or postgres://");
        }
        let mut providers = BTreeMap::new();
        for (id, p) in file.providers {
            let id = ProviderId::parse(&id).with_context(|| format!("[providers.{id}]"))?;
            let provider = crate::providers::catalogue::resolve(&id, p)?;
            providers.insert(id, provider);
        }
        let identity = resolve_identity(file.identity)?;
        let ops = resolve_ops(args, file.metrics_listen, file.metrics_token, file.log_format)?;
        let trusted_proxies = file
            .trusted_proxies
            .iter()
            .map(|entry| crate::net::parse_trusted_proxy(entry))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("trusted_proxies: {e}"))?;
        let token_api = token_api::TokenApiLimits::resolve(file.token_api)?;
        let webhooks = webhooks::WebhookSettings::resolve(file.webhooks)?;
        let gateway = gateway::GatewaySettings::resolve(file.gateway)?;
        if let Some(url) = &file.signal_listener_url
            && !(url.starts_with("postgres:") || url.starts_with("postgresql:"))
        {
            bail!("signal_listener_url must start with postgres://");
        }
        Ok(Self {
            signal_listener_url: file.signal_listener_url,
            ops,
            trusted_proxies,
            token_api,
            webhooks,
            gateway,
            identity,
            listen,
            public_url,
            public_url_given,
            database_url,
            data_dir,
            demo: args.demo || file.demo.unwrap_or(false),
            demo_api_keys: file.demo_api_keys.unwrap_or(false),
            encryption_key: env_key.or(file.encryption_key).map(SecretString::from),
            retired_encryption_keys: file.retired_encryption_keys.into_iter().map(SecretString::from).collect(),
            authorization_ttl: file.authorization_ttl.unwrap_or(Duration::from_secs(600)),
            connect_wait: file.connect_wait.unwrap_or(Duration::from_secs(120)),
            mrtr_wait: file.mrtr_wait.unwrap_or(Duration::from_secs(30)).max(Duration::from_millis(100)),
            progress_interval: file.progress_interval.unwrap_or(Duration::from_secs(5)).max(Duration::from_millis(50)),
            shutdown_grace: file.shutdown_grace.unwrap_or(Duration::from_secs(20)),
            mcp_session_idle: file.mcp_session_idle.unwrap_or(MCP_SESSION_IDLE).max(Duration::from_secs(10)),
            mcp_session_park: file.mcp_session_park.unwrap_or(MCP_SESSION_PARK).max(MCP_SESSION_PARK_AT_LEAST),
            prompts_dir: file.prompts_dir.unwrap_or_else(|| data_dir_for_defaults.join("prompts")),
            page_size: match file.page_size {
                Some(0) => bail!("page_size must be at least 1"),
                Some(n) => n,
                None => 50,
            },
            database_timeout: match file.database_timeout {
                Some(d) if d < Duration::from_millis(100) => bail!("database_timeout must be at least 100ms"),
                Some(d) => d,
                None => Duration::from_secs(5),
            },
            refresh_lease: match file.refresh_lease {
                Some(d) if d < Duration::from_secs(1) => bail!("refresh_lease must be at least 1s"),
                Some(d) => d,
                None => Duration::from_secs(10),
            },
            refresh_margin: match file.refresh_margin {
                Some(d) if d > MAX_REFRESH_MARGIN => bail!("refresh_margin must be at most 1h"),
                Some(d) => d,
                None => DEFAULT_REFRESH_MARGIN,
            },
            refresh_attempts_per_minute: match file.refresh_attempts_per_minute {
                Some(0) => bail!("refresh_attempts_per_minute must be at least 1"),
                Some(n) if n > 600 => bail!("refresh_attempts_per_minute must be at most 600"),
                Some(n) => n,
                None => 6,
            },
            key_reload_interval: match file.key_reload_interval {
                Some(d) if d < Duration::from_millis(100) => bail!("key_reload_interval must be at least 100ms"),
                Some(d) => d,
                None => Duration::from_secs(30),
            },
            providers,
        })
    }

    /// Where the signal listener connects (PostgreSQL).
    pub fn signal_listener_url(&self) -> &str {
        self.signal_listener_url.as_deref().unwrap_or(&self.database_url)
    }

    /// The MCP endpoint, which is also the `aud` of bearer tokens and the RFC 9728 `resource`.
    pub fn mcp_url(&self) -> Url {
        self.url("/mcp")
    }

    /// For commands that write this broker's address into identity data (a local user's
    /// issuer): refuses when the public URL was not given but made from `listen`, since a
    /// command run without the server's settings would otherwise store `http://127.0.0.1:8080`.
    pub fn require_public_url(&self, what: &str) -> anyhow::Result<()> {
        if !self.public_url_given {
            bail!(
                "{what} writes this broker's public URL (it names the issuer of local accounts and \
                 tokens), and none was given: it would be guessed as {} from --listen. Pass the URL the \
                 server runs with: --public-url (or OAUTH_BROKER_PUBLIC_URL, or public_url in --config)",
                self.issuer()
            );
        }
        Ok(())
    }

    /// The issuer of the broker's own tokens.
    pub fn issuer(&self) -> String {
        self.public_url.as_str().trim_end_matches('/').to_owned()
    }

    /// An absolute URL under the public URL. `path` starts with '/'.
    pub fn url(&self, path: &str) -> Url {
        let base = self.public_url.as_str().trim_end_matches('/');
        // Joining a base we validated with a path we build ourselves cannot fail.
        Url::parse(&format!("{base}{path}")).unwrap_or_else(|_| self.public_url.clone())
    }

    /// Cookies get `Secure` when users reach us over https.
    pub fn secure_cookies(&self) -> bool {
        self.public_url.scheme() == "https"
    }

    /// The callback shared by every provider before each got its own; still answered for
    /// authorizations redirected with it (see [`Self::provider_redirect_uri`]).
    pub fn redirect_uri(&self) -> Url {
        self.url("/oauth/callback")
    }

    /// Where `provider` sends the browser back to; registered with that provider exactly. One
    /// per provider, so a response can only complete an authorization of the provider it was
    /// issued for (RFC 9700 §4.4.2, mix-up defence for providers without RFC 9207 `iss`).
    pub fn provider_redirect_uri(&self, provider: &ProviderId) -> Url {
        self.url(&format!("/oauth/callback/{provider}"))
    }
}

fn resolve_identity(file: IdentityFile) -> anyhow::Result<IdentityConfig> {
    let mode = file.mode.unwrap_or_default();
    let client_secret = match (file.client_secret, file.client_secret_env) {
        (Some(_), Some(_)) => bail!("[identity]: give client_secret or client_secret_env, not both"),
        (Some(s), None) => Some(SecretString::from(s)),
        (None, Some(var)) => Some(SecretString::from(
            std::env::var(&var)
                .with_context(|| format!("[identity] client_secret_env names {var}, which is not set"))?,
        )),
        (None, None) => None,
    };
    if mode == IdentityMode::Oidc {
        let Some(issuer) = &file.issuer else { bail!("[identity] mode = \"oidc\" needs issuer") };
        if issuer.scheme() != "https" && !is_loopback(issuer) {
            bail!("[identity] issuer must be https (http only on loopback)");
        }
        if file.client_id.is_none() {
            bail!("[identity] mode = \"oidc\" needs client_id (the broker's client for browser sign-in)");
        }
    }
    let admin_claim = match (file.admin_claim, file.admin_value) {
        (None, None) => None,
        (Some(claim), Some(value)) if mode == IdentityMode::Oidc && !claim.is_empty() && !value.is_empty() => {
            Some((claim, value))
        }
        (Some(_), Some(_)) if mode != IdentityMode::Oidc => {
            bail!("[identity] admin_claim is for mode = \"oidc\"; local admins are made with `admin users set-admin`")
        }
        _ => bail!("[identity] admin_claim and admin_value go together, both non-empty"),
    };
    const ALLOWED: &[&str] = &["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"];
    let algorithms = if file.algorithms.is_empty() {
        vec!["RS256".into(), "PS256".into(), "ES256".into(), "EdDSA".into()]
    } else {
        for alg in &file.algorithms {
            if !ALLOWED.contains(&alg.as_str()) {
                bail!("[identity] algorithm {alg} is not accepted (allowed: {})", ALLOWED.join(", "));
            }
        }
        file.algorithms
    };
    Ok(IdentityConfig {
        mode,
        issuer: file.issuer,
        client_id: file.client_id,
        client_secret,
        audience: file.audience,
        scopes_supported: file.scopes_supported,
        required_scopes: file.required_scopes,
        leeway: file.leeway.unwrap_or(Duration::from_secs(60)),
        algorithms,
        admin_claim,
    })
}

fn default_public_url(listen: SocketAddr) -> anyhow::Result<Url> {
    let host = if listen.ip().is_unspecified() { "127.0.0.1".to_string() } else { listen.ip().to_string() };
    let host = if host.contains(':') { format!("[{host}]") } else { host };
    Ok(Url::parse(&format!("http://{host}:{}", listen.port()))?)
}

fn normalize_public_url(url: Url) -> anyhow::Result<Url> {
    if url.scheme() != "http" && url.scheme() != "https" {
        bail!("public_url must be http or https, got {url}");
    }
    if url.query().is_some() || url.fragment().is_some() {
        bail!("public_url must not have a query or fragment");
    }
    let trimmed = url.as_str().trim_end_matches('/').to_owned();
    Ok(Url::parse(&trimmed)?)
}

/// Flags and environment over the file, as for every setting; the metrics token from
/// `OAUTH_BROKER_METRICS_TOKEN` over the file, and at least 16 characters (it guards the
/// counters of everything the broker does).
fn resolve_ops(
    args: &SettingsArgs,
    metrics_listen: Option<String>,
    metrics_token: Option<String>,
    log_format: Option<String>,
) -> anyhow::Result<OpsConfig> {
    let file_listen =
        metrics_listen.as_deref().map(parse_listen).transpose().map_err(|e| anyhow::anyhow!("metrics_listen: {e}"))?;
    let file_format =
        log_format.as_deref().map(LogFormat::parse).transpose().map_err(|e| anyhow::anyhow!("log_format: {e}"))?;
    let env_token = std::env::var("OAUTH_BROKER_METRICS_TOKEN").ok().filter(|t| !t.is_empty());
    let metrics_token = env_token.or(metrics_token);
    if let Some(token) = &metrics_token
        && token.trim().chars().count() < 16
    {
        bail!("metrics_token must be at least 16 characters (OAUTH_BROKER_METRICS_TOKEN or metrics_token)");
    }
    Ok(OpsConfig {
        metrics_listen: args.metrics_listen.or(file_listen),
        metrics_token: metrics_token.map(|t| SecretString::from(t.trim().to_owned())),
        log_format: args.log_format.or(file_format).unwrap_or_default(),
    })
}

/// `--listen`: an IP:PORT, or a HOST:PORT resolved now (an IPv4 address first, so
/// `localhost:8080` listens where browsers look first).
pub fn parse_listen(value: &str) -> Result<SocketAddr, String> {
    if let Ok(address) = value.parse() {
        return Ok(address);
    }
    let explain = || {
        format!(
            "{value:?} is not an address to listen on: give IP:PORT or HOST:PORT, e.g. 127.0.0.1:8080 or localhost:8080"
        )
    };
    let addresses: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(value).map_err(|_| explain())?.collect();
    addresses.iter().find(|a| a.is_ipv4()).or(addresses.first()).copied().ok_or_else(explain)
}

/// For error messages: never print a database password.
pub fn redact_database_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn listen_takes_ip_port_or_host_port_and_explains_anything_else() {
        assert_eq!(super::parse_listen("127.0.0.1:9092").unwrap().to_string(), "127.0.0.1:9092");
        let local = super::parse_listen("localhost:9092").unwrap();
        assert!(local.ip().is_loopback() && local.port() == 9092, "{local}");
        for bad in ["localhost", "nonsense", ":80", "127.0.0.1:99999"] {
            let error = super::parse_listen(bad).unwrap_err();
            assert!(error.contains("e.g. 127.0.0.1:8080"), "{bad}: {error}");
        }
    }

    use super::*;

    /// The whole error as `main` prints it (`{:#}`: each context and its cause).
    fn error_of(toml: &str) -> String {
        format!("{:#}", Config::from_toml(&SettingsArgs::default(), toml).unwrap_err())
    }

    #[test]
    fn a_duration_that_is_not_one_is_named_with_how_to_write_it() {
        for key in ["authorization_ttl", "connect_wait", "mrtr_wait", "shutdown_grace", "database_timeout"] {
            let error = error_of(&format!("{key} = \"ten minutes\"\n"));
            assert!(error.contains(key), "names the setting: {error}");
            assert!(error.contains("\"ten minutes\" is not a duration"), "{error}");
            assert!(error.contains("\"10m\""), "shows how to write one: {error}");
            assert!(!error.contains("expected number at 0"), "not the parser's words: {error}");
        }
        let ok = Config::from_toml(&SettingsArgs::default(), "authorization_ttl = \"1h 30m\"\n").unwrap();
        assert_eq!(ok.authorization_ttl, Duration::from_secs(5400));
    }

    #[test]
    fn a_public_url_without_a_scheme_or_host_says_what_is_missing() {
        for text in ["127.0.0.1:18484", "localhost:8080", "broker.example.com"] {
            let error = parse_public_url(text).unwrap_err();
            assert!(error.contains("has no scheme") && error.contains(&format!("http://{text}")), "{text}: {error}");
            assert!(!error.contains("relative URL without a base"), "{error}");
        }
        let error = parse_public_url("ftp://broker.example").unwrap_err();
        assert!(error.contains("not an http:// or https:// URL"), "{error}");
        assert_eq!(parse_public_url(" https://b.example/ ").unwrap().as_str(), "https://b.example/");
        let error = error_of("public_url = \"127.0.0.1:18484\"\n");
        assert!(error.starts_with("public_url: ") && error.contains("has no scheme"), "{error}");
    }

    #[test]
    fn defaults_give_a_local_sqlite_broker_on_8080() {
        let c = Config::from_toml(&SettingsArgs::default(), "").unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(c.mcp_url().as_str(), "http://127.0.0.1:8080/mcp");
        assert!(c.database_url.starts_with("sqlite://./data/"));
        assert!(!c.secure_cookies());
    }

    #[test]
    fn idle_mcp_sessions_end_after_five_minutes_unless_configured_and_never_within_ten_seconds() {
        let default = Config::from_toml(&SettingsArgs::default(), "").unwrap();
        assert_eq!(default.mcp_session_idle, Duration::from_secs(300));
        let set = Config::from_toml(&SettingsArgs::default(), "mcp_session_idle = \"90s\"\n").unwrap();
        assert_eq!(set.mcp_session_idle, Duration::from_secs(90));
        let tiny = Config::from_toml(&SettingsArgs::default(), "mcp_session_idle = \"1s\"\n").unwrap();
        assert_eq!(tiny.mcp_session_idle, Duration::from_secs(10));
    }

    #[test]
    fn idle_mcp_sessions_park_after_ten_seconds_unless_configured_and_never_within_one() {
        let default = Config::from_toml(&SettingsArgs::default(), "").unwrap();
        assert_eq!(default.mcp_session_park, Duration::from_secs(10));
        let park = Config::from_toml(&SettingsArgs::default(), "mcp_session_park = \"3s\"\n").unwrap();
        assert_eq!(park.mcp_session_park, Duration::from_secs(3));
        let tiny = Config::from_toml(&SettingsArgs::default(), "mcp_session_park = \"10ms\"\n").unwrap();
        assert_eq!(tiny.mcp_session_park, Duration::from_secs(1));
    }

    #[test]
    fn flags_override_the_file() {
        let args = SettingsArgs { public_url: Some(Url::parse("https://b.example/").unwrap()), ..Default::default() };
        let c = Config::from_toml(&args, "public_url = \"https://file.example\"\n").unwrap();
        assert_eq!(c.issuer(), "https://b.example");
        assert!(c.secure_cookies());
    }

    #[test]
    fn identity_defaults_to_local_and_oidc_needs_an_issuer_and_client() {
        let c = Config::from_toml(&SettingsArgs::default(), "").unwrap();
        assert_eq!(c.identity.mode, IdentityMode::Local);
        assert!(Config::from_toml(&SettingsArgs::default(), "[identity]\nmode = \"oidc\"\n").is_err());
        let oidc = "[identity]\nmode = \"oidc\"\nissuer = \"https://idp.example\"\nclient_id = \"broker\"\n";
        let c = Config::from_toml(&SettingsArgs::default(), oidc).unwrap();
        assert_eq!(c.identity.algorithms, ["RS256", "PS256", "ES256", "EdDSA"]);
        let hs = format!("{oidc}algorithms = [\"HS256\"]\n");
        assert!(Config::from_toml(&SettingsArgs::default(), &hs).is_err(), "HMAC is never accepted");
    }

    #[test]
    fn admin_claim_needs_its_value_and_oidc_mode() {
        let oidc = "[identity]\nmode = \"oidc\"\nissuer = \"https://idp.example\"\nclient_id = \"broker\"\n";
        let both = format!("{oidc}admin_claim = \"groups\"\nadmin_value = \"broker-admins\"\n");
        let c = Config::from_toml(&SettingsArgs::default(), &both).unwrap();
        assert_eq!(c.identity.admin_claim, Some(("groups".into(), "broker-admins".into())));
        for bad in [
            format!("{oidc}admin_claim = \"groups\"\n"),
            format!("{oidc}admin_value = \"x\"\n"),
            format!("{oidc}admin_claim = \"\"\nadmin_value = \"x\"\n"),
            "[identity]\nadmin_claim = \"groups\"\nadmin_value = \"x\"\n".to_owned(),
        ] {
            assert!(Config::from_toml(&SettingsArgs::default(), &bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn providers_are_parsed_and_checked() {
        let toml = r#"
            [providers.github]
            authorization_url = "https://github.com/login/oauth/authorize"
            token_url = "https://github.com/login/oauth/access_token"
            client_id = "abc"
            client_secret = "shh"
            scopes = ["read:user"]
            api_base_url = "https://api.github.com"
            token_auth_method = "client_secret_post"
        "#;
        let c = Config::from_toml(&SettingsArgs::default(), toml).unwrap();
        let gh = &c.providers[&ProviderId::parse("github").unwrap()];
        assert_eq!(gh.api_base_url.as_str(), "https://api.github.com/");
        assert_eq!(gh.token_auth_method, TokenAuthMethod::ClientSecretPost);
        let insecure = toml.replace("https://api.github.com", "http://api.github.com");
        assert!(Config::from_toml(&SettingsArgs::default(), &insecure).is_err());
        let unknown = format!("{toml}\nsurprise = 1\n");
        assert!(Config::from_toml(&SettingsArgs::default(), &unknown).is_err());
        assert_eq!(gh.scope_description("read:user"), Some("See your profile"), "the catalogue describes it");
    }

    #[test]
    fn scope_descriptions_come_from_the_provider_table() {
        let toml = r#"
            [providers.github]
            authorization_url = "https://github.com/login/oauth/authorize"
            token_url = "https://github.com/login/oauth/access_token"
            client_id = "abc"
            client_secret = "shh"
            api_base_url = "https://api.github.com"

            [providers.github.scope_descriptions]
            "read:user" = "See your profile"
            repo = "   "
        "#;
        let c = Config::from_toml(&SettingsArgs::default(), toml).unwrap();
        let gh = &c.providers[&ProviderId::parse("github").unwrap()];
        assert_eq!(gh.scope_description("read:user"), Some("See your profile"));
        assert_eq!(gh.scope_description("repo"), None, "a blank description is none");
    }

    #[test]
    fn the_refresh_margin_and_attempt_cap_have_defaults_and_bounds() {
        let c = Config::from_toml(&SettingsArgs::default(), "").unwrap();
        assert_eq!((c.refresh_margin, c.refresh_attempts_per_minute), (Duration::from_secs(60), 6));
        let set = "refresh_margin = \"5m\"\nrefresh_attempts_per_minute = 2\n";
        let c = Config::from_toml(&SettingsArgs::default(), set).unwrap();
        assert_eq!((c.refresh_margin, c.refresh_attempts_per_minute), (Duration::from_secs(300), 2));
        for bad in ["refresh_margin = \"2h\"", "refresh_margin = \"soon\"", "refresh_attempts_per_minute = 0"] {
            assert!(Config::from_toml(&SettingsArgs::default(), bad).is_err(), "{bad}");
        }
    }
}
