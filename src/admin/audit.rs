//! `oauth-broker admin audit [--user NAME] [--limit N] [--json] [--follow]`: the audit log,
//! with who acted (the `actor` column) and how it ended. `--follow` keeps printing new entries
//! as a running server writes them (polling by id, so nothing is shown twice) until Ctrl-C or
//! SIGTERM; with `--json` it prints one JSON object per line. [`follow`] says how the tail stays
//! complete on PostgreSQL and through a database outage.

mod follow;
mod lines;

use self::lines::{HEADERS, entry_json, entry_row, entry_user_ids, print_lines};
use super::display::{UserNames, table};
use crate::state::AppState;

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
    let stop = super::serve::shutdown_signal();
    let window: Vec<i64> = entries.iter().map(|e| e.id).collect();
    let tail = before.tail(&window, state.core.store.backend() == crate::store::Backend::Sqlite);
    // Oldest first from here on, as a tail does.
    if !json {
        println!("{}", HEADERS.join("  "));
    }
    print_lines(entries.iter().rev(), &names, json)?;
    follow::follow(state, user_id.as_deref(), &mut names, json, tail, stop).await
}
