//! `admin users …` and `admin tokens …`.

use std::io::Read;

use anyhow::{Context, bail};
use clap::Subcommand;
use secrecy::{ExposeSecret, SecretString};

use crate::identity::accounts::Disabled;
use crate::identity::password;
use crate::state::AppState;
use crate::store::StoreError;
use crate::store::audit::{Actor, AuditEvent};
use crate::store::users::{AdminChange, AdminGuard, Guarded};

#[derive(Subcommand, Debug)]
pub enum UsersCommand {
    /// Create a local account. Without --password-stdin a random password is generated and printed.
    Add {
        /// The username: 1-64 letters, digits, '.', '_', '-' or '@'.
        name: String,
        /// Read the password from standard input (first line).
        #[arg(long)]
        password_stdin: bool,
        /// Let this user open the admin pages (/admin).
        #[arg(long)]
        admin: bool,
        /// The organization the user joins (its slug; default: the default organization).
        #[arg(long, value_name = "SLUG")]
        org: Option<String>,
        /// Their role there: `member`, or `admin` (manages the organization's people and services).
        #[arg(long, default_value = "member", value_parser = super::orgs::parse_role)]
        role: crate::domain::OrgRole,
    },
    /// Let a user open the admin pages (/admin), or stop them.
    SetAdmin {
        /// The username.
        name: String,
        /// `true` or `false`.
        #[arg(action = clap::ArgAction::Set, value_parser = clap::value_parser!(bool))]
        admin: bool,
        /// Unmake the last enabled admin all the same (nobody can then open /admin until
        /// `set-admin NAME true` is run here).
        #[arg(long)]
        force: bool,
    },
    /// Disable an account: it cannot sign in, its tokens are refused, its browser sessions end.
    Disable {
        /// The username.
        name: String,
        /// Disable the last enabled admin all the same (nobody can then open /admin).
        #[arg(long)]
        force: bool,
    },
    /// Enable a disabled account again.
    Enable {
        /// The username.
        name: String,
    },
    /// Set a new password (read from standard input).
    Passwd {
        /// The username.
        name: String,
    },
    /// List accounts.
    List {
        /// Machine-readable output (times as Unix seconds).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum TokensCommand {
    /// Print a bearer token (JWT) for NAME, for MCP clients' Authorization header.
    Issue {
        /// The user the token speaks for (username).
        name: String,
        /// Lifetime, e.g. 30m, 1h, 7d.
        #[arg(long, default_value = "1h", value_parser = crate::config::parse_duration)]
        ttl: std::time::Duration,
        /// Which program the token is for (e.g. `ci`, `claude-desktop`): the user's consent
        /// to use each connection is then asked and kept for this program alone. Without it,
        /// all of the user's unlabelled tokens count as one client.
        #[arg(long)]
        client: Option<String>,
        /// A token for the tool server registered as SERVICE (`admin services add`) instead of
        /// for the broker's own /mcp: its audience is that service's resource URL, so only that
        /// tool server can present it to the token API.
        #[arg(long, value_name = "SERVICE")]
        service: Option<String>,
    },
}

pub fn validate_username(name: &str) -> anyhow::Result<()> {
    let ok = (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b));
    if !ok {
        bail!("a username is 1-64 characters of letters, digits, '.', '_', '-' or '@'");
    }
    Ok(())
}

/// A `--client` label: 1-64 letters, digits, '.', '_' or '-' (it is shown on consent pages).
pub fn validate_client_label(label: &str) -> anyhow::Result<()> {
    let ok = (1..=64).contains(&label.len()) && label.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !ok {
        bail!("a --client label is 1-64 characters of letters, digits, '.', '_' or '-'");
    }
    Ok(())
}

fn read_password_stdin() -> anyhow::Result<SecretString> {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).context("reading the password from standard input")?;
    let line = text.lines().next().unwrap_or_default().to_owned();
    if line.is_empty() {
        bail!("no password on standard input");
    }
    Ok(SecretString::from(line))
}

pub async fn run_users(state: &AppState, command: UsersCommand) -> anyhow::Result<()> {
    match command {
        UsersCommand::Add { name, password_stdin, admin, org, role } => {
            validate_username(&name)?;
            state.core.config.require_public_url("admin users add")?;
            let org = super::orgs::resolve(state, org.as_deref()).await?;
            let (secret, generated) =
                if password_stdin { (read_password_stdin()?, false) } else { (password::generate_password(), true) };
            let hash = password::hash_password(&secret)?;
            match state
                .core
                .store
                .users()
                .create_local_in(&org.id, role, &state.core.config.issuer(), &name, &hash, state.core.now())
                .await
            {
                Ok(user) => {
                    let detail =
                        format!("username={} org={} role={role}", crate::store::audit::quoted(&name, 64), org.slug);
                    let event = AuditEvent::new(Actor::Cli, "admin.user_added", Some(&user.id)).detail(Some(&detail));
                    state.core.store.audit().record(state.core.now(), event).await?;
                    if admin {
                        state.core.store.users().set_admin(&user.id, true).await?;
                        let event = AuditEvent::new(Actor::Cli, "admin.user_admin_set", Some(&user.id))
                            .detail(Some("admin=true"));
                        state.core.store.audit().record(state.core.now(), event).await?;
                    }
                    let operator = if admin { " as an admin" } else { "" };
                    println!("created user {name}{operator} (id {}), {role} of {}", user.id, org.slug);
                    if generated {
                        println!("password: {}", secret.expose_secret());
                    }
                    Ok(())
                }
                Err(StoreError::Conflict) => bail!("a user named {name} already exists"),
                Err(e) => Err(e.into()),
            }
        }
        UsersCommand::SetAdmin { name, admin, force } => {
            let user =
                state.core.store.users().by_username(&name).await?.with_context(|| format!("no user named {name}"))?;
            if admin {
                state.core.store.users().set_admin(&user.id, true).await?;
            } else {
                let guard = if force { AdminGuard::Force } else { AdminGuard::KeepOne };
                match state.core.store.users().disable_or_demote(&user.id, AdminChange::Demote, guard).await? {
                    Guarded::Done => {}
                    Guarded::LastAdmin => bail!(last_admin(&name, "unmake")),
                    Guarded::NoSuchUser => bail!("no user named {name}"),
                }
            }
            let detail = format!("admin={admin}");
            let event = AuditEvent::new(Actor::Cli, "admin.user_admin_set", Some(&user.id)).detail(Some(&detail));
            state.core.store.audit().record(state.core.now(), event).await?;
            if admin {
                println!("{name} is now an admin (may open /admin)");
            } else {
                println!("{name} is no longer an admin; their open admin pages stop working at the next request");
            }
            Ok(())
        }
        UsersCommand::Disable { name, force } => {
            let user =
                state.core.store.users().by_username(&name).await?.with_context(|| format!("no user named {name}"))?;
            let guard = if force { AdminGuard::Force } else { AdminGuard::KeepOne };
            match crate::identity::accounts::disable(&state.identity, &user.id, guard, Actor::Cli).await? {
                Disabled::Done(ended) => {
                    println!("{name} is disabled: sign-in and tokens refused; {ended} browser session(s) ended");
                    Ok(())
                }
                Disabled::LastAdmin => bail!(last_admin(&name, "disable")),
                Disabled::NoSuchUser => bail!("no user named {name}"),
            }
        }
        UsersCommand::Enable { name } => enable(state, &name).await,
        UsersCommand::Passwd { name } => {
            let user =
                state.core.store.users().by_username(&name).await?.with_context(|| format!("no user named {name}"))?;
            let hash = password::hash_password(&read_password_stdin()?)?;
            state.core.store.users().set_password_hash(&user.id, &hash).await?;
            let ended = state.core.store.browser_sessions().delete_for_user(&user.id).await?;
            println!("password changed for {name}; {ended} browser session(s) signed out");
            Ok(())
        }
        UsersCommand::List { json } => {
            // A batch at a time, oldest first: the first lines come at once however many
            // users there are.
            use super::display::{BATCH, StreamJson, StreamTable, emit};
            use crate::store::paging::{Search, Window};
            let mut table = StreamTable::new(&["USER", "ID", "ROLE", "STATE", "CREATED"]);
            let mut array = StreamJson::default();
            let mut window = Some(Window::first(BATCH));
            while let Some(this) = window.take() {
                let page = state.core.store.users().page(&Search::new(""), this).await?;
                window = page.next.map(|next| Window::after(BATCH, next));
                if json {
                    let rows: Vec<_> = page
                        .rows
                        .iter()
                        .map(|u| serde_json::json!({"id": u.id, "username": u.username, "issuer": u.issuer, "subject": u.subject, "created_at": u.created_at, "admin": u.is_admin(), "disabled": u.is_disabled()}))
                        .collect();
                    emit(&array.batch(&rows))?;
                } else {
                    let rows: Vec<_> = page
                        .rows
                        .iter()
                        .map(|u| {
                            vec![
                                super::display::user_name(u),
                                u.id.clone(),
                                if u.is_admin() { "admin" } else { "user" }.to_owned(),
                                if u.is_disabled() { "disabled" } else { "enabled" }.to_owned(),
                                super::display::iso_time(u.created_at),
                            ]
                        })
                        .collect();
                    emit(&table.batch(&rows))?;
                }
            }
            if json {
                emit(&array.end())?;
            }
            Ok(())
        }
    }
}

pub async fn run_tokens(state: &AppState, command: TokensCommand) -> anyhow::Result<()> {
    match command {
        TokensCommand::Issue { name, ttl, client, service } => {
            if let Some(label) = &client {
                validate_client_label(label)?;
            }
            // The token names the public URL as its issuer: a guessed one makes a token the
            // server refuses.
            state.core.config.require_public_url("admin tokens issue")?;
            let audience = match &service {
                Some(service) => Some(service_audience(state, service).await?),
                None => None,
            };
            let token =
                issue_token_for_audience(state, &name, client.as_deref(), audience.as_deref(), ttl.as_secs() as i64)
                    .await?;
            // Audited like every admin action: for whom, which client and audience, how long;
            // never the token.
            let user =
                state.core.store.users().by_username(&name).await?.with_context(|| format!("no user named {name}"))?;
            let detail = format!(
                "client={} service={} ttl={}s",
                client.as_deref().map_or("-".into(), |c| crate::store::audit::quoted(c, 64)),
                service.as_deref().map_or("-".into(), |s| crate::store::audit::quoted(s, 64)),
                ttl.as_secs()
            );
            let event = AuditEvent::new(Actor::Cli, "admin.token_issued", Some(&user.id)).detail(Some(&detail));
            state.core.store.audit().record(state.core.now(), event).await?;
            println!("{token}");
            Ok(())
        }
    }
}

/// The resource URL of a registered service, the audience of user tokens meant for it.
async fn service_audience(state: &AppState, service: &str) -> anyhow::Result<String> {
    let row = state
        .core
        .store
        .services()
        .by_name(service)
        .await?
        .with_context(|| format!("no service named {service} (see `oauth-broker admin services list`)"))?;
    let resource = row.resource.with_context(|| {
        format!(
            "service {service} has no resource URL, so no user token can be meant for it; register it with --resource"
        )
    })?;
    Ok(resource.to_string())
}

/// A bearer token for a local user (also used by the demo set-up).
pub async fn issue_token_for(
    state: &AppState,
    name: &str,
    client: Option<&str>,
    ttl_seconds: i64,
) -> anyhow::Result<String> {
    issue_token_for_audience(state, name, client, None, ttl_seconds).await
}

/// [`issue_token_for`] for `audience` (a tool server's resource URL), or the broker's /mcp.
pub async fn issue_token_for_audience(
    state: &AppState,
    name: &str,
    client: Option<&str>,
    audience: Option<&str>,
    ttl_seconds: i64,
) -> anyhow::Result<String> {
    if state.identity.oidc.is_some() {
        bail!(
            "identity mode is \"oidc\": /mcp accepts only the identity provider's tokens, so a token issued here would be refused; get one from the issuer"
        );
    }
    if ttl_seconds <= 0 || ttl_seconds > 366 * 24 * 3600 {
        bail!("--ttl must be between 1s and 366d");
    }
    let user = state.core.store.users().by_username(name).await?.with_context(|| format!("no user named {name}"))?;
    // A local account's identity is its id: it keeps working when the public URL changes. The
    // token names this broker's public URL, so it must be the one the server runs with.
    if !user.is_local() {
        bail!("{name} is not a local account; its tokens come from its identity provider");
    }
    let audience = audience.unwrap_or(state.identity.keys.audience());
    Ok(state.identity.keys.issue_for_audience(
        &user.subject,
        user.username.as_deref(),
        client,
        audience,
        state.core.now(),
        ttl_seconds,
    )?)
}

/// Why nothing changed when NAME is the last enabled admin (nobody could open /admin).
fn last_admin(name: &str, verb: &str) -> String {
    format!(
        "{name} is the last enabled admin: with nobody left, no one could open /admin, so nothing changed. \
         Make another admin first (`oauth-broker admin users set-admin OTHER true`), or {verb} {name} anyway with --force."
    )
}

async fn enable(state: &AppState, name: &str) -> anyhow::Result<()> {
    let user = state.core.store.users().by_username(name).await?.with_context(|| format!("no user named {name}"))?;
    crate::identity::accounts::set_disabled(&state.identity, &user.id, false, Actor::Cli).await?;
    println!("{name} is enabled again");
    Ok(())
}
