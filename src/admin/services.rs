//! `admin services …`: register the tool servers that use the token API ([`crate::api`]).
//! Everything is validated before anything is written. A client secret is printed once, to
//! standard output, and stored only as its hash; `list` shows neither. Every change is audited
//! without the secret.

use std::collections::BTreeSet;

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::{Value, json};
use url::Url;

use super::display::table;
use crate::crypto::OneTimeSecret;
use crate::domain::ProviderId;
use crate::providers::registry::Providers;
use crate::state::AppState;
use crate::store::StoreError;
use crate::store::token_api::{NewService, ServiceRow};

/// Client secrets: `obs_` and 32 random bytes, URL-safe base64.
const SECRET_PREFIX: &str = "obs_";
const SECRET_BYTES: usize = 32;

#[derive(Subcommand, Debug)]
pub enum ServicesCommand {
    /// Register a tool server; prints its client id and secret (shown once).
    Add {
        /// The service's name: 1-64 characters of a-z, 0-9, '-' or '_'; the client id is `svc_NAME`.
        name: String,
        /// The configured providers whose tokens it may ask for, comma separated.
        #[arg(long, value_delimiter = ',', required = true)]
        providers: Vec<String>,
        /// The audience users' access tokens must name for it: an absolute https URL (http
        /// only on 127.0.0.1, localhost or [::1]), without fragment or user info.
        #[arg(long)]
        resource: Option<String>,
        /// Only through the proxy: it never receives a raw token.
        #[arg(long)]
        proxy_only: bool,
        /// It may name a user by id instead of presenting the user's access token.
        #[arg(long)]
        trusted: bool,
        /// The organization it belongs to (its slug; default: the default organization): it
        /// gets tokens of that organization's members only.
        #[arg(long, value_name = "SLUG")]
        org: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// List tool servers (never a secret or its hash).
    List {
        /// Only this organization's (its slug).
        #[arg(long, value_name = "SLUG")]
        org: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Replace a tool server's secret; the old one stops working at once. Prints the new one once.
    RotateSecret {
        /// The service's name, as `services list` shows it without `svc_`.
        name: String,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Remove a tool server and every consent users gave it.
    Remove {
        /// The service's name, as `services list` shows it without `svc_`.
        name: String,
    },
    /// Its webhook.
    #[command(flatten)]
    Webhook(super::webhooks::ServiceWebhookCommand),
}

/// The provider id rule, with a message about services.
pub fn validate_service_name(name: &str) -> anyhow::Result<()> {
    if ProviderId::parse(name).is_err() {
        bail!("a service name is 1-64 characters of a-z, 0-9, '-' or '_', got {name:?}");
    }
    Ok(())
}

/// The `--providers` list as configured provider ids; refuses an empty list and unknown ids,
/// naming the configured ones.
pub fn parse_providers(given: &[String], configured: &Providers) -> anyhow::Result<BTreeSet<ProviderId>> {
    let mut providers = BTreeSet::new();
    let mut unknown = Vec::new();
    for id in given.iter().map(|id| id.trim()) {
        match configured.find(id) {
            Some(provider) => {
                providers.insert(provider.id.clone());
            }
            None => unknown.push(format!("{id:?}")),
        }
    }
    if !unknown.is_empty() {
        let known = configured.ids();
        let known = if known.is_empty() {
            "none (see [providers] in the configuration, or --demo)".to_owned()
        } else {
            known.join(", ")
        };
        bail!("unknown provider(s) {}; configured providers: {known}", unknown.join(", "));
    }
    if providers.is_empty() {
        bail!("--providers must name at least one provider");
    }
    Ok(providers)
}

/// `--resource`: absolute https, or http on a loopback host; no fragment, no user info.
pub fn parse_resource(text: &str) -> anyhow::Result<Url> {
    let url = Url::parse(text).with_context(|| format!("--resource {text:?} is not an absolute URL"))?;
    match url.scheme() {
        "https" => {}
        "http" if crate::net::is_loopback(&url) => {}
        "http" => bail!("--resource must use https (http only on 127.0.0.1, localhost or [::1])"),
        _ => bail!("--resource must be an https URL"),
    }
    if url.host().is_none() {
        bail!("--resource must name a host");
    }
    if url.fragment().is_some() {
        bail!("--resource must not have a fragment");
    }
    if !url.username().is_empty() || url.password().is_some() {
        bail!("--resource must not carry user info");
    }
    Ok(url)
}

/// What `list` and `add` show of a service: never the secret hash.
fn describe(row: &ServiceRow, org: &str) -> Value {
    json!({
        "client_id": row.id,
        "name": row.name,
        "org": org,
        "providers": row.providers,
        "resource": row.resource,
        "proxy_only": row.proxy_only,
        "trusted": row.trusted,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    })
}

fn print_credentials(row: &ServiceRow, org: &str, secret: &OneTimeSecret, json: bool) -> anyhow::Result<()> {
    if json {
        let mut out = describe(row, org);
        out["client_secret"] = secret.expose_plaintext().into();
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("client_id: {}", row.id);
        println!("client_secret: {}", secret.expose_plaintext());
    }
    eprintln!("the client secret is shown only now; the broker keeps only its hash");
    Ok(())
}

pub async fn run_services(state: &AppState, command: ServicesCommand) -> anyhow::Result<()> {
    match command {
        ServicesCommand::Add { name, providers, resource, proxy_only, trusted, org, json } => {
            validate_service_name(&name)?;
            let org = super::orgs::resolve(state, org.as_deref()).await?;
            let providers = parse_providers(&providers, &state.core.providers)?;
            let resource = resource.as_deref().map(parse_resource).transpose()?;
            if let Some(resource) = &resource {
                // A user token names one audience: two holders of it could act for each
                // other's users, and the broker's own would let a tool server use /mcp tokens.
                if crate::identity::bearer::is_own_audience(&state.identity, resource.as_str()) {
                    bail!("--resource {resource} is the broker's own audience; give the tool server's MCP URL");
                }
                if let Some(other) = state.core.store.services().by_resource(resource.as_str()).await? {
                    bail!("--resource {resource} is already registered for service {}", other.name);
                }
            }
            let secret = OneTimeSecret::generate(SECRET_PREFIX, SECRET_BYTES);
            let new = NewService {
                name: &name,
                providers: &providers,
                resource: resource.as_ref(),
                proxy_only,
                trusted,
                secret_hash: secret.hash(),
                organization: &org.id,
            };
            let now = state.core.now();
            let row = match state.core.store.services().create(&new, now).await {
                Ok(row) => row,
                Err(StoreError::Conflict) => bail!("a service named {name} already exists"),
                Err(e) => return Err(e.into()),
            };
            let detail = format!(
                "client_id={} org={} providers={} resource={} proxy_only={proxy_only} trusted={trusted}",
                row.id,
                org.slug,
                row.providers.iter().map(ProviderId::as_str).collect::<Vec<_>>().join(","),
                row.resource.as_ref().map_or("-", Url::as_str),
            );
            state.core.store.audit().record_implied(now, None, "service.added", None, Some(&detail)).await?;
            print_credentials(&row, org.slug.as_str(), &secret, json)
        }
        ServicesCommand::List { org, json } => {
            let mut services = state.core.store.services().list().await?;
            if let Some(slug) = org {
                let org = super::orgs::resolve(state, Some(&slug)).await?;
                services.retain(|s| s.organization == org.id);
            }
            let ids: Vec<_> = services.iter().map(|s| &s.organization).collect();
            let orgs = super::orgs::slugs(state, &ids).await?;
            let org_of = |s: &ServiceRow| orgs.get(&s.organization).cloned().unwrap_or_default();
            if json {
                let all: Vec<_> = services.iter().map(|s| describe(s, &org_of(s))).collect();
                println!("{}", serde_json::to_string_pretty(&all)?);
            } else {
                let rows: Vec<Vec<String>> = services
                    .iter()
                    .map(|s| {
                        vec![
                            s.id.clone(),
                            org_of(s),
                            s.providers.iter().map(ProviderId::as_str).collect::<Vec<_>>().join(","),
                            s.proxy_only.to_string(),
                            s.trusted.to_string(),
                            s.resource.as_ref().map_or("-", Url::as_str).to_owned(),
                        ]
                    })
                    .collect();
                print!("{}", table(&["CLIENT_ID", "ORG", "PROVIDERS", "PROXY_ONLY", "TRUSTED", "RESOURCE"], &rows));
            }
            Ok(())
        }
        ServicesCommand::RotateSecret { name, json } => {
            let secret = OneTimeSecret::generate(SECRET_PREFIX, SECRET_BYTES);
            let now = state.core.now();
            if !state.core.store.services().rotate_secret(&name, secret.hash(), now).await? {
                bail!("no service named {name}");
            }
            let row = state
                .core
                .store
                .services()
                .by_name(&name)
                .await?
                .with_context(|| format!("no service named {name}"))?;
            let detail = format!("client_id={}", row.id);
            state.core.store.audit().record_implied(now, None, "service.secret_rotated", None, Some(&detail)).await?;
            let orgs = super::orgs::slugs(state, &[&row.organization]).await?;
            print_credentials(&row, orgs.get(&row.organization).map_or("", String::as_str), &secret, json)
        }
        ServicesCommand::Webhook(command) => super::webhooks::run_service_webhook(state, command).await,
        ServicesCommand::Remove { name } => {
            let now = state.core.now();
            let Some(consents) = state.core.store.services().remove(&name, now).await? else {
                bail!("no service named {name}");
            };
            let client_id = ServiceRow::client_id_for(&name);
            let detail = format!("client_id={client_id} consents_removed={consents}");
            state.core.store.audit().record_implied(now, None, "service.removed", None, Some(&detail)).await?;
            println!("removed service {name} ({client_id}) and {consents} consent(s)");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, SettingsArgs};

    fn demo_providers() -> Providers {
        let args = SettingsArgs { demo: true, ..SettingsArgs::default() };
        let config = Config::from_toml(&args, "").unwrap();
        Providers::new(config.providers.clone())
            .with(crate::demo_provider::entry::provider_entry(&config, secrecy::SecretString::from("s".to_owned())))
    }

    #[test]
    fn service_names_follow_the_provider_id_rule() {
        assert!(validate_service_name("notes").is_ok());
        assert!(validate_service_name("my-tool_2").is_ok());
        for bad in ["", "Notes", "two words", "svc:x", "../x", &"x".repeat(65)] {
            let error = validate_service_name(bad).unwrap_err().to_string();
            assert!(error.contains("service name"), "{bad:?}: {error}");
        }
    }

    #[test]
    fn providers_must_be_configured_and_unknown_ones_are_named_with_the_known() {
        let configured = demo_providers();
        let set = parse_providers(&["demo".into(), " demo".into()], &configured).unwrap();
        assert_eq!(set.into_iter().map(|p| p.to_string()).collect::<Vec<_>>(), ["demo"]);
        let error = parse_providers(&["demo".into(), "github".into()], &configured).unwrap_err().to_string();
        assert!(error.contains("\"github\"") && error.contains("configured providers: demo"), "{error}");
        assert!(parse_providers(&["".into()], &configured).is_err());
        assert!(parse_providers(&[], &configured).is_err());
        let error = parse_providers(&["demo".into()], &Providers::default()).unwrap_err().to_string();
        assert!(error.contains("configured providers: none"), "{error}");
    }

    #[test]
    fn a_resource_is_absolute_https_or_loopback_http_without_fragment_or_user_info() {
        for good in ["https://tools.example/mcp", "http://127.0.0.1:9000/mcp", "http://localhost/x", "http://[::1]:8/"]
        {
            assert!(parse_resource(good).is_ok(), "{good}");
        }
        for bad in [
            "tools.example/mcp",
            "/mcp",
            "http://tools.example/mcp",
            "ftp://tools.example/",
            "https://tools.example/mcp#frag",
            "https://user@tools.example/",
            "https://user:pw@tools.example/",
            "file:///etc/passwd",
        ] {
            assert!(parse_resource(bad).is_err(), "{bad}");
        }
    }
}
