//! `admin orgs apps …`: an organization's own OAuth app per provider (bring your own app). Every
//! change is a new version; grants keep the version that issued them. Audited; a secret is read
//! from standard input or an environment variable, never from the command line, and never shown.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use clap::Subcommand;
use secrecy::SecretString;
use serde_json::json;

use super::display::{emit, iso_time};
use super::org_lookup::{audit, find, org_detail};
use crate::broker::provider_apps::{self, AppChange, AppError};
use crate::config::ProviderConfig;
use crate::domain::Scopes;
use crate::state::AppState;
use crate::store::StoreError;
use crate::store::organizations::{Organization, ProviderApp};

#[derive(Subcommand, Debug)]
pub enum AppsCommand {
    /// The organization's apps in use, by provider, with the redirect URI each must register.
    List {
        /// The organization's slug.
        slug: String,
        /// Machine-readable output (times as Unix seconds).
        #[arg(long)]
        json: bool,
    },
    /// Set the organization's own app at a provider: its members' new connections there use
    /// it. Grants made before keep the app that issued them.
    Set {
        /// The organization's slug.
        slug: String,
        /// The provider's id (`oauth-broker providers list`).
        provider: String,
        /// The client id registered at the provider.
        #[arg(long)]
        client_id: String,
        /// Read the client secret from standard input (one line).
        #[arg(long, conflicts_with_all = ["client_secret_env", "public"])]
        client_secret_stdin: bool,
        /// Read the client secret from this environment variable.
        #[arg(long, conflicts_with = "public")]
        client_secret_env: Option<String>,
        /// A public client: no secret (the provider must allow it).
        #[arg(long)]
        public: bool,
        /// Default scopes, space separated, asked for when a tool names none (default: the
        /// operator's).
        #[arg(long)]
        scopes: Option<String>,
        /// A template value the provider's URLs take, as NAME=VALUE (tenant, domain,
        /// subdomain, shop, base_url); repeat for several.
        #[arg(long = "template", value_parser = parse_template)]
        templates: Vec<(String, String)>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Every version of the organization's app at a provider, newest first.
    History {
        /// The organization's slug.
        slug: String,
        /// The provider's id.
        provider: String,
        /// Machine-readable output (times as Unix seconds).
        #[arg(long)]
        json: bool,
    },
    /// Stop using the organization's app at a provider for new connections (grants made with
    /// it keep working with it).
    Remove {
        /// The organization's slug.
        slug: String,
        /// The provider's id.
        provider: String,
    },
}

fn parse_template(text: &str) -> Result<(String, String), String> {
    let (name, value) = text.split_once('=').ok_or("expected NAME=VALUE, such as tenant=contoso.onmicrosoft.com")?;
    if name.is_empty() || value.is_empty() {
        return Err("expected NAME=VALUE with neither empty".into());
    }
    Ok((name.to_owned(), value.to_owned()))
}

/// The operator's provider `id`, refused when an organization cannot bring an app for it.
fn provider(state: &AppState, id: &str) -> anyhow::Result<std::sync::Arc<ProviderConfig>> {
    let found = state
        .core
        .providers
        .find(id)
        .with_context(|| format!("no provider {id} is configured (see `oauth-broker providers list`)"))?;
    if found.is_api_key() {
        bail!("{id} is an API-key provider: its users enter their own key, so there is no app to set");
    }
    Ok(found)
}

fn describe(state: &AppState, app: &ProviderApp, grants: Option<i64>) -> serde_json::Value {
    json!({
        "id": app.id,
        "provider": app.provider,
        "version": app.version,
        "client_id": app.client_id,
        "public_client": app.client_secret_sealed.is_none(),
        "scopes": app.scopes.as_ref().map(Scopes::to_space_separated),
        "template_values": app.template_values,
        "redirect_uri": provider_apps::redirect_uri(&state.core, app).map(|u| u.to_string()),
        "created_at": app.created_at,
        "retired_at": app.retired_at,
        "grants": grants,
    })
}

fn templates_text(app: &ProviderApp) -> String {
    if app.template_values.is_empty() {
        return "-".into();
    }
    app.template_values.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

pub async fn run_apps(state: &AppState, command: AppsCommand) -> anyhow::Result<()> {
    match command {
        AppsCommand::List { slug, json } => {
            let org = find(state, &slug).await?;
            let apps = state.core.store.in_org(&org.id).provider_apps().in_use().await?;
            let mut rows = Vec::with_capacity(apps.len());
            for app in &apps {
                let grants = state.core.store.in_org(&org.id).provider_apps().grants_of(&app.id).await?;
                rows.push((app, grants));
            }
            if json {
                let list: Vec<_> = rows.iter().map(|(app, n)| describe(state, app, Some(*n))).collect();
                return emit(&format!("{}\n", serde_json::to_string_pretty(&list)?));
            }
            if rows.is_empty() {
                return emit(&format!(
                    "{} has no app of its own: its members connect with the operator's apps (where shared).\n",
                    org.slug
                ));
            }
            let mut out = format!(
                "{:<16} {:<8} {:<36} {:<8} {:<24} REDIRECT URI\n",
                "PROVIDER", "VERSION", "CLIENT ID", "GRANTS", "TEMPLATE VALUES"
            );
            for (app, grants) in rows {
                let redirect = provider_apps::redirect_uri(&state.core, app).map(|u| u.to_string()).unwrap_or_default();
                out.push_str(&format!(
                    "{:<16} {:<8} {:<36} {:<8} {:<24} {redirect}\n",
                    app.provider,
                    app.version,
                    app.client_id,
                    grants,
                    templates_text(app)
                ));
            }
            emit(&out)
        }
        AppsCommand::Set {
            slug,
            provider: id,
            client_id,
            client_secret_stdin,
            client_secret_env,
            public,
            scopes,
            templates,
            json,
        } => {
            let org = find(state, &slug).await?;
            let provider = provider(state, &id)?;
            let secret = match (client_secret_stdin, client_secret_env.as_deref(), public) {
                (_, _, true) => None,
                (true, None, false) => Some(super::secret_input::read(None, "--client-secret-env")?),
                (false, Some(var), false) => Some(super::secret_input::read(Some(var), "--client-secret-env")?),
                _ => bail!("give the client secret with --client-secret-stdin or --client-secret-env VAR, or --public"),
            };
            if secret.as_deref().is_some_and(str::is_empty) {
                bail!("the client secret is empty");
            }
            let secret = secret.map(SecretString::from);
            let scopes = scopes
                .as_deref()
                .map(Scopes::from_space_separated)
                .transpose()
                .map_err(|e| anyhow::anyhow!("--scopes: {e}"))?;
            let mut template_values = BTreeMap::new();
            for (name, value) in templates {
                if template_values.insert(name.clone(), value).is_some() {
                    bail!("--template {name} given twice");
                }
            }
            let change = AppChange {
                client_id: &client_id,
                client_secret: secret.as_ref(),
                scopes: scopes.as_ref(),
                template_values: &template_values,
            };
            let app = match provider_apps::set(&state.core, &org.id, &provider, &change).await {
                Ok(app) => app,
                Err(AppError::Invalid(e)) => bail!("{e}"),
                Err(AppError::Store(StoreError::Conflict)) => {
                    bail!("another change to {}'s app at {id} was stored at the same moment; run this again", org.slug)
                }
                Err(e) => return Err(e.into()),
            };
            let detail = format!(
                "{} provider={id} app={} version={} client_id={}",
                org_detail(&org),
                app.id,
                app.version,
                app.client_id
            );
            audit(state, "org.app_set", None, detail).await?;
            if json {
                return emit(&format!("{}\n", serde_json::to_string_pretty(&describe(state, &app, None))?));
            }
            let redirect = state.core.config.provider_redirect_uri(&provider.id);
            emit(&format!(
                "{}'s app at {} is now version {} (client id {}): new connections there use it; grants made before keep theirs.\n\
                 Register this redirect URI with the app at the provider: {redirect}\n",
                org.slug, provider.display_name, app.version, app.client_id
            ))
        }
        AppsCommand::History { slug, provider: id, json } => {
            let org = find(state, &slug).await?;
            let provider = provider(state, &id)?;
            let versions = state.core.store.in_org(&org.id).provider_apps().history(provider.id.as_str()).await?;
            if json {
                let list: Vec<_> = versions.iter().map(|app| describe(state, app, None)).collect();
                return emit(&format!("{}\n", serde_json::to_string_pretty(&list)?));
            }
            if versions.is_empty() {
                return emit(&format!("{} never set an app of its own at {id}\n", org.slug));
            }
            let mut out = format!("{:<8} {:<36} {:<21} {:<21} ID\n", "VERSION", "CLIENT ID", "SET", "RETIRED");
            for app in &versions {
                let retired = app.retired_at.map_or_else(|| "in use".to_owned(), iso_time);
                out.push_str(&format!(
                    "{:<8} {:<36} {:<21} {:<21} {}\n",
                    app.version,
                    app.client_id,
                    iso_time(app.created_at),
                    retired,
                    app.id
                ));
            }
            emit(&out)
        }
        AppsCommand::Remove { slug, provider: id } => {
            let org: Organization = find(state, &slug).await?;
            let provider = provider(state, &id)?;
            if !state.core.store.in_org(&org.id).provider_apps().retire(provider.id.as_str(), state.core.now()).await? {
                bail!("{} has no app of its own at {id} in use", org.slug);
            }
            audit(state, "org.app_removed", None, format!("{} provider={id}", org_detail(&org))).await?;
            let after = if org.id.is_default() || provider.shared_with_organizations {
                "new connections there use the operator's app"
            } else {
                "new connections there are refused until it sets an app again (the operator does not share theirs)"
            };
            emit(&format!(
                "{}'s app at {id} is no longer used for new connections: {after}; grants made with it keep it.\n",
                org.slug
            ))
        }
    }
}
