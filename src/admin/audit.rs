//! `oauth-broker admin audit [--user NAME] [--limit N] [--json] [--follow]`: the audit log,
//! with who acted (the `actor` column) and how it ended. `--follow` keeps printing new entries
//! as a running server writes them (polling by id, so nothing is shown twice) until Ctrl-C or
//! SIGTERM; with `--json` it prints one JSON object per line. [`follow`] says how the tail stays
//! complete on PostgreSQL and through a database outage.

mod follow;

use serde_json::json;

use super::display::{UserNames, iso_time, printable, table};
use crate::state::AppState;
use crate::store::audit::AuditEntry;

pub async fn run_audit(
    state: &AppState,
    user: Option<String>,
    limit: i64,
    json: bool,
    follow: bool,
) -> anyhow::Result<()> {
    let user_id = match user {
        Some(name) => Some(super::grants::user_id(state, &name).await?),
        None => None,
    };
    // Before the first window, and before anything is printed: once the first lines are out, a
    // database that goes away only pauses the tail.
    let before = if follow { Some(follow::Before::read(state, user_id.as_deref()).await?) } else { None };
    let entries = state.core.store.audit().entries(user_id.as_deref(), limit).await?;
    let mut names = UserNames::of_ids(&state.core.store, entry_user_ids(&entries)).await?;
    let Some(before) = before else {
        if json {
            let rows: Vec<_> = entries.iter().map(|e| entry_json(e, &names)).collect();
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            print!("{}", table(&HEADERS, &entries.iter().map(|e| entry_row(e, &names)).collect::<Vec<_>>()));
        }
        return Ok(());
    };
    // Installed before anything is printed: whoever stops the tail may do so as soon as the
    // first lines appear.
    let stop = super::shutdown_signal();
    let window: Vec<i64> = entries.iter().map(|e| e.id).collect();
    let tail = before.tail(&window, state.core.store.backend() == crate::store::Backend::Sqlite);
    // Oldest first from here on, as a tail does.
    if !json {
        println!("{}", HEADERS.join("  "));
    }
    print_lines(entries.iter().rev(), &names, json)?;
    follow::follow(state, user_id.as_deref(), &mut names, json, tail, stop).await
}

/// The users entries name: as the target, or as the acting user or admin.
fn entry_user_ids(entries: &[AuditEntry]) -> impl Iterator<Item = &str> {
    entries.iter().flat_map(|e| {
        let actor = e.actor.as_deref().and_then(|a| a.strip_prefix("admin:").or_else(|| a.strip_prefix("user:")));
        e.user_id.as_deref().into_iter().chain(actor)
    })
}

const HEADERS: [&str; 7] = ["TIME", "ACTION", "OUTCOME", "ACTOR", "USER", "PROVIDER", "DETAIL"];

fn print_lines<'a>(entries: impl Iterator<Item = &'a AuditEntry>, names: &UserNames, json: bool) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for e in entries {
        if json {
            writeln!(out, "{}", serde_json::to_string(&entry_json(e, names))?)?;
        } else {
            writeln!(out, "{}", entry_row(e, names).join("  "))?;
        }
    }
    out.flush()?;
    Ok(())
}

fn entry_json(e: &AuditEntry, names: &UserNames) -> serde_json::Value {
    json!({
        "id": e.id,
        "at": e.at,
        "actor": e.actor,
        "actor_name": actor_name(e.actor.as_deref(), names),
        "outcome": e.outcome,
        "user_id": e.user_id,
        "user": e.user_id.as_deref().map(|id| names.of(id)),
        "action": e.action,
        "provider": e.provider,
        "detail": e.detail,
    })
}

fn entry_row(e: &AuditEntry, names: &UserNames) -> Vec<String> {
    vec![
        iso_time(e.at),
        printable(&e.action),
        e.outcome.as_deref().map_or("-".to_owned(), printable),
        actor_name(e.actor.as_deref(), names),
        names.of_opt(e.user_id.as_deref()).to_owned(),
        e.provider.as_deref().map_or("-".to_owned(), printable),
        e.detail.as_deref().map_or(String::new(), printable),
    ]
}

/// `admin:<id>` as `admin:alice`; other actors as stored.
fn actor_name(actor: Option<&str>, names: &UserNames) -> String {
    match actor.and_then(|a| a.split_once(':')) {
        Some((kind @ ("user" | "admin"), id)) => format!("{kind}:{}", names.of(id)),
        Some(_) => actor.map_or("-".to_owned(), printable),
        None => actor.map_or("-".to_owned(), printable),
    }
}
