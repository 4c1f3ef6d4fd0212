//! `oauth-broker admin audit [--user NAME] [--limit N] [--json] [--follow]`: the audit log,
//! with who acted (the `actor` column) and how it ended. `--follow` keeps printing new entries
//! as a running server writes them (polling by id, so nothing is shown twice) until Ctrl-C or
//! SIGTERM; with `--json` it prints one JSON object per line.
//!
//! Nothing is skipped either, though PostgreSQL hands out an id when a row is inserted, not when
//! it commits: of two concurrent writes (a server's audit batch and a request's own row, say),
//! the higher id can become visible first, and a tail that moved past it would never print the
//! lower. So on PostgreSQL `--follow` prints only up to the newest id that was visible
//! [`LATE_COMMIT_GRACE`] ago ([`VisibleUpTo`]): every row at or below it took its id before
//! then and has had that long to commit (audit writes take milliseconds). SQLite has one writer
//! at a time, so its ids become visible in order and are printed at once.

use std::time::Duration;

use serde_json::json;

use super::display::{UserNames, iso_time, printable, table};
use crate::state::AppState;
use crate::store::audit::AuditEntry;

/// How often `--follow` asks the database for new entries.
const FOLLOW_POLL: Duration = Duration::from_millis(500);
/// The most entries `--follow` reads per poll (a burst is printed over several polls).
const FOLLOW_BATCH: i64 = 500;
/// How long a row's id may stay invisible after a higher one is visible, on PostgreSQL (see the
/// module): also how far `--follow` lags behind there.
const LATE_COMMIT_GRACE: Duration = Duration::from_secs(2);

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
    let entries = state.store.audit_entries(user_id.as_deref(), limit).await?;
    let mut names = UserNames::of_ids(&state.store, entry_user_ids(&entries)).await?;
    if !follow {
        if json {
            let rows: Vec<_> = entries.iter().map(|e| entry_json(e, &names)).collect();
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            print!("{}", table(&HEADERS, &entries.iter().map(|e| entry_row(e, &names)).collect::<Vec<_>>()));
        }
        return Ok(());
    }
    // Installed before anything is printed: whoever stops the tail may do so as soon as the
    // first lines appear.
    let stop = super::shutdown_signal();
    // Oldest first from here on, as a tail does.
    let mut last = entries.first().map_or(0, |e| e.id);
    if entries.is_empty() {
        last = state.store.audit_entries(None, 1).await?.first().map_or(0, |e| e.id);
    }
    if !json {
        println!("{}", HEADERS.join("  "));
    }
    print_lines(entries.iter().rev(), &names, json)?;
    tokio::pin!(stop);
    let mut poll = tokio::time::interval(FOLLOW_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let in_order = state.store.backend() == crate::store::Backend::Sqlite;
    let mut visible = VisibleUpTo::new(last);
    loop {
        tokio::select! {
            _ = &mut stop => return Ok(()),
            _ = poll.tick() => {}
        }
        let up_to = if in_order {
            i64::MAX
        } else {
            visible.observe(std::time::Instant::now(), state.store.newest_audit_id().await?)
        };
        let mut new = state.store.audit_entries_after(last, user_id.as_deref(), FOLLOW_BATCH).await?;
        new.retain(|entry| entry.id <= up_to);
        let Some(newest) = new.last() else { continue };
        last = newest.id;
        names.add(&state.store, entry_user_ids(&new)).await?;
        print_lines(new.iter(), &names, json)?;
    }
}

/// The newest audit id that was visible [`LATE_COMMIT_GRACE`] ago, from the newest ids seen at
/// each poll: up to it, every row has had that long to commit.
struct VisibleUpTo {
    seen: std::collections::VecDeque<(std::time::Instant, i64)>,
    up_to: i64,
}

impl VisibleUpTo {
    /// Starting from `printed`, the id the tail has printed up to.
    fn new(printed: i64) -> Self {
        Self { seen: std::collections::VecDeque::new(), up_to: printed }
    }

    /// `newest` was the highest id visible at `now`; returns how far the tail may print.
    fn observe(&mut self, now: std::time::Instant, newest: i64) -> i64 {
        self.seen.push_back((now, newest));
        while let Some(&(at, id)) = self.seen.front()
            && now.duration_since(at) >= LATE_COMMIT_GRACE
        {
            self.up_to = self.up_to.max(id);
            self.seen.pop_front();
        }
        self.up_to
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_prints_up_to_what_was_visible_a_grace_ago_never_beyond() {
        let start = std::time::Instant::now();
        let mut visible = VisibleUpTo::new(10);
        // Row 12 is visible at once; row 11 (an earlier id) commits a moment later.
        assert_eq!(visible.observe(start, 12), 10, "12 may still have a lower id committing");
        assert_eq!(visible.observe(start + FOLLOW_POLL, 12), 10);
        assert_eq!(visible.observe(start + LATE_COMMIT_GRACE, 15), 12, "ids up to 12 had the grace");
        assert_eq!(visible.observe(start + LATE_COMMIT_GRACE * 2, 15), 15);
        assert_eq!(visible.observe(start + LATE_COMMIT_GRACE * 3, 15), 15, "never backwards");
    }
}
