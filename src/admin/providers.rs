//! `oauth-broker providers list [--json | --markdown]`: the compiled-in catalogue and what this
//! configuration enables, with the redirect URI to register at each provider.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::config::{Config, TokenAuthMethod};
use crate::providers::catalogue::{self, ProviderFields};

#[derive(clap::Subcommand, Debug)]
pub enum ProvidersCommand {
    /// Every provider in the catalogue (and any only in the configuration): which are enabled,
    /// how each authenticates, its default scopes, the template values it needs, and the
    /// redirect URI to register.
    List {
        /// Machine-readable output.
        #[arg(long, conflicts_with = "markdown")]
        json: bool,
        /// The catalogue as a Markdown table (the one in docs/providers.md).
        #[arg(long)]
        markdown: bool,
    },
}

pub fn run(config: &Config, command: ProvidersCommand) -> anyhow::Result<()> {
    let ProvidersCommand::List { json, markdown } = command;
    let rows = rows(config)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&Value::Array(rows))?);
    } else if markdown {
        print!("{}", markdown_table(&rows));
    } else {
        print!("{}", text_table(&rows));
    }
    Ok(())
}

/// The plain listing: one line per provider under a header row; the redirect URI column is
/// filled for the providers this configuration enables (the one to register at each).
fn text_table(rows: &[Value]) -> String {
    let lines: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let text = |k: &str| row[k].as_str().unwrap_or("").to_owned();
            let list = |k: &str| {
                row[k]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" "))
                    .unwrap_or_default()
            };
            let or_dash = |s: String| if s.is_empty() { "-".to_owned() } else { s };
            vec![
                text("id"),
                if row["enabled"] == true { "yes" } else { "no" }.to_owned(),
                text("display_name"),
                text("token_auth_method"),
                or_dash(list("default_scopes")),
                or_dash(list("needs")),
                or_dash(text("redirect_uri")),
            ]
        })
        .collect();
    super::display::table(
        &["ID", "ENABLED", "NAME", "AUTH", "DEFAULT SCOPES", "NEEDS", "REDIRECT URI TO REGISTER"],
        &lines,
    )
}

/// One JSON object per provider: the catalogue's entries, then providers only configured.
fn rows(config: &Config) -> anyhow::Result<Vec<Value>> {
    let catalogue = catalogue::builtin()?;
    let mut rows = Vec::new();
    for (id, entry) in &catalogue {
        let enabled = config.providers.iter().find(|(pid, p)| pid.as_str() == id || p.catalogue.as_deref() == Some(id));
        rows.push(row(config, id, entry, enabled.map(|(pid, _)| pid.to_string())));
    }
    for (id, provider) in &config.providers {
        if provider.catalogue.is_none() {
            let mut entry = ProviderFields {
                display_name: Some(provider.display_name.clone()),
                scopes: Some(provider.default_scopes.iter().map(str::to_owned).collect()),
                ..Default::default()
            };
            entry.token_auth_method = Some(method(provider.token_auth_method).into());
            rows.push(row(config, id.as_str(), &entry, Some(id.to_string())));
        }
    }
    Ok(rows)
}

fn method(method: TokenAuthMethod) -> &'static str {
    match method {
        TokenAuthMethod::ClientSecretBasic => "client_secret_basic",
        TokenAuthMethod::ClientSecretPost => "client_secret_post",
        TokenAuthMethod::None => "none",
    }
}

fn row(config: &Config, id: &str, entry: &ProviderFields, enabled_as: Option<String>) -> Value {
    // An API-key provider has no OAuth redirect to register.
    let redirect = enabled_as
        .as_deref()
        .filter(|_| entry.kind.as_deref() != Some("api_key"))
        .and_then(|p| crate::domain::ProviderId::parse(p).ok())
        .map(|p| config.provider_redirect_uri(&p).to_string());
    let extra: BTreeMap<String, String> = entry.extra_authorize_params.clone().unwrap_or_default();
    json!({
        "id": id,
        "display_name": entry.display_name.clone().unwrap_or_else(|| id.to_owned()),
        "enabled": enabled_as.is_some(),
        "enabled_as": enabled_as,
        "redirect_uri": redirect,
        // An API-key entry has no client: the user's key is how it authenticates.
        "token_auth_method": match entry.kind.as_deref() {
            Some("api_key") => "api_key".to_owned(),
            _ => entry.token_auth_method.clone().unwrap_or_else(|| "client_secret_basic".into()),
        },
        "pkce": if entry.pkce.as_deref() == Some("required") { "required" } else { "sent (S256)" },
        "scope_separator": entry.scope_separator.clone().unwrap_or_else(|| " ".into()),
        "default_scopes": entry.scopes.clone().unwrap_or_default(),
        "available_scopes": entry.available_scopes.clone().unwrap_or_default().into_keys().collect::<Vec<_>>(),
        "extra_authorize_params": extra,
        "revocation": entry.revocation_url.is_some(),
        "identity": entry.userinfo_url.is_some() || entry.account_id_field.is_some(),
        "needs": entry.templates().into_iter().filter(|t| match *t {
            "tenant" => entry.tenant.is_none(),
            "base_url" => entry.base_url.is_none(),
            _ => true,
        }).collect::<Vec<_>>(),
        "notes": entry.notes,
    })
}

fn markdown_table(rows: &[Value]) -> String {
    let mut out = String::from(
        "| id | provider | client auth | default scopes | revocation | accounts | set in config | notes |\n|---|---|---|---|---|---|---|---|\n",
    );
    for row in rows.iter().filter(|r| r["enabled"] == false || r["id"] == r["enabled_as"]) {
        let list = |k: &str| {
            row[k]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).map(|s| format!("`{s}`")).collect::<Vec<_>>().join(" "))
                .unwrap_or_default()
        };
        let text = |k: &str| row[k].as_str().unwrap_or("").replace('|', "\\|");
        let mut notes = text("notes");
        if row["pkce"] == "required" {
            notes = format!("PKCE required. {notes}").trim().to_owned();
        }
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} | {} | {} |\n",
            text("id"),
            text("display_name"),
            text("token_auth_method").replace("client_secret_", ""),
            list("default_scopes"),
            if row["revocation"] == true { "RFC 7009" } else { "—" },
            if row["identity"] == true { "by stable id" } else { "one per user" },
            list("needs"),
            notes,
        ));
    }
    out
}
