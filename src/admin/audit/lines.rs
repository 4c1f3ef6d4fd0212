//! One audit entry as `admin audit` prints it: a row of the table, or a JSON object, with the
//! users it names shown by name.

use serde_json::json;

use crate::admin::display::{UserNames, iso_time, printable};
use crate::store::audit::AuditEntry;

/// The users entries name: as the target, or as the acting user or admin.
pub(super) fn entry_user_ids(entries: &[AuditEntry]) -> impl Iterator<Item = &str> {
    entries.iter().flat_map(|e| {
        let actor = e.actor.as_deref().and_then(|a| a.strip_prefix("admin:").or_else(|| a.strip_prefix("user:")));
        e.user_id.as_deref().into_iter().chain(actor)
    })
}

pub(super) const HEADERS: [&str; 7] = ["TIME", "ACTION", "OUTCOME", "ACTOR", "USER", "PROVIDER", "DETAIL"];

pub(super) fn print_lines<'a>(
    entries: impl Iterator<Item = &'a AuditEntry>,
    names: &UserNames,
    json: bool,
) -> anyhow::Result<()> {
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

pub(super) fn entry_json(e: &AuditEntry, names: &UserNames) -> serde_json::Value {
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

pub(super) fn entry_row(e: &AuditEntry, names: &UserNames) -> Vec<String> {
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
