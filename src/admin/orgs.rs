//! `admin orgs …`: the organizations one broker serves and who belongs to each. Operators run
//! these; every change is audited. Users are named by username (local accounts) or by id.

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::json;

use super::display::{BATCH, StreamJson, StreamTable, emit, iso_time, user_name};
use super::org_lookup::{audit, find, org_detail, parse_slug};
use crate::domain::{OrgRole, OrganizationId};
use crate::state::AppState;
use crate::store::StoreError;
use crate::store::organizations::{Joined, Organization};
use crate::store::paging::{Search, Window};
use crate::store::users::User;

#[derive(Subcommand, Debug)]
pub enum OrgsCommand {
    /// Create an organization.
    Add {
        /// Its slug, typed as `--org SLUG`: 1-64 characters of a-z, 0-9 or '-'.
        slug: String,
        /// Its name, as pages and the consent page show it (default: the slug).
        #[arg(long)]
        name: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// List organizations, by slug.
    List {
        /// Only those whose slug, name or id holds this text.
        #[arg(long, default_value = "")]
        search: String,
        /// Machine-readable output (times as Unix seconds).
        #[arg(long)]
        json: bool,
    },
    /// One organization: its id, name and how many members it has.
    Show {
        /// The organization's slug.
        slug: String,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Give an organization a new name (its slug and id stay).
    Rename {
        /// The organization's slug.
        slug: String,
        /// The new name.
        #[arg(long)]
        name: String,
    },
    /// An organization's members, oldest first.
    Members {
        /// The organization's slug.
        slug: String,
        /// Machine-readable output (times as Unix seconds).
        #[arg(long)]
        json: bool,
    },
    /// Make a user a member of an organization (a member already keeps their role).
    Join {
        /// The organization's slug.
        slug: String,
        /// The user: a username, or a user id.
        user: String,
        /// `member` (uses the organization's services and connections) or `admin` (also
        /// manages its people and services).
        #[arg(long, default_value = "member", value_parser = parse_role)]
        role: OrgRole,
    },
    /// Change a member's role.
    SetRole {
        /// The organization's slug.
        slug: String,
        /// The user: a username, or a user id.
        user: String,
        /// `member` or `admin`.
        #[arg(value_parser = parse_role)]
        role: OrgRole,
    },
    /// Remove a member from an organization (the user stays, with their other organizations).
    Leave {
        /// The organization's slug.
        slug: String,
        /// The user: a username, or a user id.
        user: String,
    },
    /// The organization's own OAuth apps, per provider (bring your own app).
    Apps {
        #[command(subcommand)]
        command: super::org_apps::AppsCommand,
    },
}

pub(super) fn parse_role(text: &str) -> Result<OrgRole, String> {
    OrgRole::parse(text).map_err(|e| e.to_string())
}

/// The organization `--org SLUG` names, or the default one when none is given.
pub async fn resolve(state: &AppState, slug: Option<&str>) -> anyhow::Result<Organization> {
    match slug {
        None => Ok(state.core.store.organizations().default_organization().await?),
        Some(slug) => find(state, slug).await,
    }
}

/// A user by username, else by id.
async fn find_user(state: &AppState, user: &str) -> anyhow::Result<User> {
    let users = state.core.store.users();
    if let Some(found) = users.by_username(user).await? {
        return Ok(found);
    }
    users.by_id(user).await?.with_context(|| format!("no user {user} (a username or a user id)"))
}

fn describe(org: &Organization) -> serde_json::Value {
    json!({"id": org.id, "slug": org.slug, "name": org.name, "created_at": org.created_at})
}

pub async fn run_orgs(state: &AppState, command: OrgsCommand) -> anyhow::Result<()> {
    let store = &state.core.store;
    match command {
        OrgsCommand::Apps { command } => super::org_apps::run_apps(state, command).await,
        OrgsCommand::Add { slug, name, json } => {
            let parsed = parse_slug(&slug)?;
            let name = name.unwrap_or_else(|| slug.clone());
            check_name(&name)?;
            let org = match store.organizations().create(&parsed, &name, state.core.now()).await {
                Ok(org) => org,
                Err(StoreError::Conflict) => bail!("an organization {slug} already exists"),
                Err(e) => return Err(e.into()),
            };
            audit(state, "org.added", None, org_detail(&org)).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&describe(&org))?);
            } else {
                println!("created organization {} (id {})", org.slug, org.id);
            }
            Ok(())
        }
        OrgsCommand::List { search, json } => {
            let search = Search::new(&search);
            let mut table = StreamTable::new(&["SLUG", "NAME", "ID", "CREATED"]);
            let mut array = StreamJson::default();
            let mut window = Some(Window::first(BATCH));
            while let Some(this) = window.take() {
                let page = store.organizations().page(&search, this).await?;
                window = page.next.map(|next| Window::after(BATCH, next));
                if json {
                    emit(&array.batch(&page.rows.iter().map(describe).collect::<Vec<_>>()))?;
                } else {
                    let rows: Vec<_> = page
                        .rows
                        .iter()
                        .map(|o| {
                            vec![
                                o.slug.to_string(),
                                super::display::printable(&o.name),
                                o.id.to_string(),
                                iso_time(o.created_at),
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
        OrgsCommand::Show { slug, json } => {
            let org = find(state, &slug).await?;
            let members = store.in_org(&org.id).members().count().await?;
            if json {
                let mut out = describe(&org);
                out["members"] = members.shown().into();
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                println!("slug:     {}", org.slug);
                println!("name:     {}", super::display::printable(&org.name));
                println!("id:       {}", org.id);
                println!("created:  {}", iso_time(org.created_at));
                println!("members:  {}", members.shown());
            }
            Ok(())
        }
        OrgsCommand::Rename { slug, name } => {
            check_name(&name)?;
            let org = find(state, &slug).await?;
            if !store.organizations().rename(&org.id, &name).await? {
                bail!("no organization {slug}");
            }
            audit(
                state,
                "org.renamed",
                None,
                format!("{} name={}", org_detail(&org), crate::store::audit::quoted(&name, 100)),
            )
            .await?;
            println!("organization {slug} is now named {}", super::display::printable(&name));
            Ok(())
        }
        OrgsCommand::Members { slug, json } => {
            let org = find(state, &slug).await?;
            let members = store.in_org(&org.id).members();
            let mut table = StreamTable::new(&["USER", "ID", "ROLE", "JOINED"]);
            let mut array = StreamJson::default();
            let mut window = Some(Window::first(BATCH));
            while let Some(this) = window.take() {
                let page = members.page(this).await?;
                window = page.next.map(|next| Window::after(BATCH, next));
                if json {
                    let rows: Vec<_> = page
                        .rows
                        .iter()
                        .map(|m| json!({"user_id": m.user.id, "username": m.user.username, "role": m.role, "joined_at": m.joined_at}))
                        .collect();
                    emit(&array.batch(&rows))?;
                } else {
                    let rows: Vec<_> = page
                        .rows
                        .iter()
                        .map(|m| vec![user_name(&m.user), m.user.id.clone(), m.role.to_string(), iso_time(m.joined_at)])
                        .collect();
                    emit(&table.batch(&rows))?;
                }
            }
            if json {
                emit(&array.end())?;
            }
            Ok(())
        }
        OrgsCommand::Join { slug, user, role } => {
            let org = find(state, &slug).await?;
            let found = find_user(state, &user).await?;
            match store.in_org(&org.id).members().add(&found.id, role, state.core.now()).await? {
                Joined::Added => {
                    audit(state, "org.member_added", Some(&found.id), format!("{} role={role}", org_detail(&org)))
                        .await?;
                    println!("{} joined {} as {role}", user_name(&found), org.slug);
                }
                Joined::Already(held) => {
                    println!(
                        "{} is already a member of {} (role {held}; `set-role` changes it)",
                        user_name(&found),
                        org.slug
                    )
                }
                Joined::NoSuchUser => bail!("no user {user}"),
            }
            Ok(())
        }
        OrgsCommand::SetRole { slug, user, role } => {
            let org = find(state, &slug).await?;
            let found = find_user(state, &user).await?;
            if !store.in_org(&org.id).members().set_role(&found.id, role).await? {
                bail!("{} is not a member of {} (`join` adds them)", user_name(&found), org.slug);
            }
            audit(state, "org.member_role_set", Some(&found.id), format!("{} role={role}", org_detail(&org))).await?;
            println!("{} is now {role} of {}", user_name(&found), org.slug);
            Ok(())
        }
        OrgsCommand::Leave { slug, user } => {
            let org = find(state, &slug).await?;
            let found = find_user(state, &user).await?;
            if !store.in_org(&org.id).members().remove(&found.id, state.core.now()).await? {
                bail!("{} is not a member of {}", user_name(&found), org.slug);
            }
            audit(state, "org.member_removed", Some(&found.id), org_detail(&org)).await?;
            println!(
                "{} is no longer a member of {}: the organization's services can no longer act for them",
                user_name(&found),
                org.slug
            );
            Ok(())
        }
    }
}

/// A name people read: 1-100 characters, no control characters.
fn check_name(name: &str) -> anyhow::Result<()> {
    let length = name.chars().count();
    if name.trim().is_empty() || length > 100 || name.chars().any(char::is_control) {
        bail!("an organization's name is 1-100 characters without control characters, got {name:?}");
    }
    Ok(())
}

/// Which organization each row belongs to, for lists that show it: its slug, or its id if the
/// organization is gone.
pub async fn slugs(
    state: &AppState,
    ids: &[&OrganizationId],
) -> anyhow::Result<std::collections::HashMap<OrganizationId, String>> {
    let found = state.core.store.organizations().slugs_of(ids).await?;
    Ok(ids
        .iter()
        .map(|id| ((*id).clone(), found.get(*id).map_or_else(|| id.to_string(), ToString::to_string)))
        .collect())
}
