//! `admin audit --follow`: prints entries as a running server writes them, each once and in id
//! order, until Ctrl-C or SIGTERM.
//!
//! - **Nothing skipped, even on PostgreSQL.** PostgreSQL hands out an id when a row is
//!   inserted, not when it commits: of two concurrent writes (a server's audit batch and a
//!   request's own row, say), the higher id can become visible first, and a tail that moved past
//!   it would never print the lower. So there the tail prints only up to the newest id that was
//!   visible [`LATE_COMMIT_GRACE`] ago ([`VisibleUpTo`]): every row at or below it took its id
//!   before then and has had that long to commit (audit writes take milliseconds). SQLite has one
//!   writer at a time, so its ids become visible in order and are printed at once.
//! - **Nothing twice, nothing lost at the start.** The command first prints the newest entries
//!   (`--limit`), as visible when it started. A row that had taken a lower id then but committed
//!   a moment later is not among them, and its id may be below all of theirs. So the tail starts
//!   [`FOLLOW_BATCH`] ids back and passes over every row that was already visible there before
//!   the window was read ([`Before`]), and over the window's own rows.
//! - **A database that goes away** (a restart, a failover, a cut network path) pauses the tail:
//!   it says so once on standard error, keeps asking at every poll and, when the database
//!   answers again, goes on from where it was, so what was written meanwhile is printed too.
//!   Any other error ends the command with it.

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use super::lines::{entry_user_ids, print_lines};
use crate::admin::display::UserNames;
use crate::state::AppState;
use crate::store::audit::AuditEntry;

/// How often the tail asks the database for new entries.
const FOLLOW_POLL: Duration = Duration::from_millis(500);
/// The most entries the tail reads per poll (a burst is printed over several polls); also how
/// many ids below the first window the tail looks for rows that committed late.
const FOLLOW_BATCH: i64 = 500;
/// How long a row's id may stay invisible after a higher one is visible, on PostgreSQL (see the
/// module): also how far the tail lags behind there.
const LATE_COMMIT_GRACE: Duration = Duration::from_secs(2);

/// Prints new entries (about `user_id`, or all) until `stop`, after the first window was printed
/// and `tail` made from it.
pub(super) async fn follow(
    state: &AppState,
    user_id: Option<&str>,
    names: &mut UserNames,
    json: bool,
    mut tail: Tail,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(stop);
    let mut poll = tokio::time::interval(FOLLOW_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut away_since: Option<Instant> = None;
    loop {
        // The stop is heard while a poll waits on a database that does not answer, too.
        let step = async {
            poll.tick().await;
            print_new(state, user_id, &mut tail, names, json).await
        };
        let outcome = tokio::select! {
            _ = &mut stop => return Ok(()),
            outcome = step => outcome,
        };
        match outcome {
            Ok(()) => {
                if let Some(since) = away_since.take() {
                    eprintln!(
                        "audit --follow: the database answers again after {}; going on from where the tail was",
                        humantime::format_duration(Duration::from_secs(since.elapsed().as_secs().max(1)))
                    );
                }
            }
            Err(error) if crate::store::unavailable::is_unavailable(error.as_ref()) => {
                if away_since.is_none() {
                    eprintln!(
                        "audit --follow: the database does not answer ({error}); asking again every {}, Ctrl-C to stop",
                        humantime::format_duration(FOLLOW_POLL)
                    );
                    away_since = Some(Instant::now());
                }
            }
            Err(error) => return Err(error.context("following the audit log")),
        }
    }
}

/// One poll: reads what came after the tail and prints what it may.
async fn print_new(
    state: &AppState,
    user_id: Option<&str>,
    tail: &mut Tail,
    names: &mut UserNames,
    json: bool,
) -> anyhow::Result<()> {
    let newest = if tail.in_order { i64::MAX } else { state.core.store.audit().newest_id().await? };
    let up_to = tail.up_to(Instant::now(), newest);
    let read = state.core.store.audit().entries_after(tail.after, user_id, FOLLOW_BATCH).await?;
    let new = tail.take(read, up_to);
    if new.is_empty() {
        return Ok(());
    }
    names.add(&state.core.store, entry_user_ids(&new)).await?;
    print_lines(new.iter(), names, json)
}

/// What the log held before the first window was read: the newest id then, and the ids at most
/// [`FOLLOW_BATCH`] below it that were visible (about the user followed, or all).
pub(super) struct Before {
    newest: i64,
    visible: Vec<i64>,
}

impl Before {
    /// Read before the first window: a row committed in between is then in the window (printed
    /// there, and passed over by the tail), and one committed after it is printed by the tail.
    pub(super) async fn read(state: &AppState, user_id: Option<&str>) -> anyhow::Result<Self> {
        let newest = state.core.store.audit().newest_id().await?;
        let near = state.core.store.audit().entries_after(furthest_back(newest), user_id, FOLLOW_BATCH).await?;
        Ok(Self { newest, visible: near.iter().map(|entry| entry.id).collect() })
    }

    /// The tail after the first window (`window`: the ids it printed).
    pub(super) fn tail(self, window: &[i64], in_order: bool) -> Tail {
        let after = furthest_back(self.newest);
        Tail {
            after,
            already_visible: self.visible.iter().chain(window).copied().filter(|id| *id > after).collect(),
            in_order,
            visible: VisibleUpTo::new(after),
        }
    }
}

/// How far back from `newest` the tail starts: a row that took its id this many inserts before
/// the tail began and has still not committed is the one it can miss.
fn furthest_back(newest: i64) -> i64 {
    newest.saturating_sub(FOLLOW_BATCH).max(0)
}

/// Where the tail is: what it has read up to, and what it must not print again.
pub(super) struct Tail {
    /// The tail reads entries with a higher id than this.
    after: i64,
    /// Ids that were visible before the first window was read, or printed by it, that the tail
    /// has not read past yet.
    already_visible: BTreeSet<i64>,
    /// Whether ids become visible in order (SQLite): then there is nothing to wait for.
    in_order: bool,
    visible: VisibleUpTo,
}

impl Tail {
    /// How far this poll may print, `newest` being the newest id visible `now`.
    fn up_to(&mut self, now: Instant, newest: i64) -> i64 {
        if self.in_order { i64::MAX } else { self.visible.observe(now, newest) }
    }

    /// Of `read` (entries after the tail, oldest first), those to print: up to `up_to`, leaving
    /// out what was visible before the first window or printed by it. The tail moves past all
    /// of them.
    fn take(&mut self, read: Vec<AuditEntry>, up_to: i64) -> Vec<AuditEntry> {
        let mut new = Vec::with_capacity(read.len());
        for entry in read.into_iter().take_while(|entry| entry.id <= up_to) {
            self.after = entry.id;
            if !self.already_visible.remove(&entry.id) {
                new.push(entry);
            }
        }
        // Ids the tail has passed will not be read again.
        self.already_visible = self.already_visible.split_off(&(self.after + 1));
        new
    }
}

/// The newest audit id that was visible [`LATE_COMMIT_GRACE`] ago, from the newest ids seen at
/// each poll: up to it, every row has had that long to commit.
struct VisibleUpTo {
    seen: VecDeque<(Instant, i64)>,
    up_to: i64,
}

impl VisibleUpTo {
    /// Starting from `printed`, the id the tail has read up to.
    fn new(printed: i64) -> Self {
        Self { seen: VecDeque::new(), up_to: printed }
    }

    /// `newest` was the highest id visible at `now`; returns how far the tail may print.
    fn observe(&mut self, now: Instant, newest: i64) -> i64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: i64) -> AuditEntry {
        AuditEntry {
            id,
            at: 0,
            user_id: None,
            action: "browser.sign_in_failed".into(),
            provider: None,
            detail: None,
            actor: Some("visitor".into()),
            outcome: Some("refused".into()),
        }
    }

    fn ids(entries: &[AuditEntry]) -> Vec<i64> {
        entries.iter().map(|e| e.id).collect()
    }

    #[test]
    fn the_tail_prints_up_to_what_was_visible_a_grace_ago_never_beyond() {
        let start = Instant::now();
        let mut visible = VisibleUpTo::new(10);
        // Row 12 is visible at once; row 11 (an earlier id) commits a moment later.
        assert_eq!(visible.observe(start, 12), 10, "12 may still have a lower id committing");
        assert_eq!(visible.observe(start + FOLLOW_POLL, 12), 10);
        assert_eq!(visible.observe(start + LATE_COMMIT_GRACE, 15), 12, "ids up to 12 had the grace");
        assert_eq!(visible.observe(start + LATE_COMMIT_GRACE * 2, 15), 15);
        assert_eq!(visible.observe(start + LATE_COMMIT_GRACE * 3, 15), 15, "never backwards");
    }

    #[test]
    fn a_row_that_commits_late_below_the_first_window_is_printed_once_the_rest_never_again() {
        // Before the window: 1000, 1001 and 1003 were visible; 1002 had its id, not committed.
        // The window (`--limit 1`) printed 1003.
        let start = Instant::now();
        let before = Before { newest: 1003, visible: vec![1000, 1001, 1003] };
        let mut tail = before.tail(&[1003], false);
        assert_eq!(tail.after, 1003 - FOLLOW_BATCH, "the tail starts a batch back");
        let read = vec![entry(1000), entry(1001), entry(1002), entry(1003), entry(1004)];
        let up_to = tail.up_to(start, 1004);
        assert!(tail.take(read.clone(), up_to).is_empty(), "nothing before the grace: {up_to}");
        let up_to = tail.up_to(start + LATE_COMMIT_GRACE, 1004);
        assert_eq!(ids(&tail.take(read, up_to)), [1002, 1004], "the late row and the new one, nothing seen before");
        assert!(tail.already_visible.is_empty());
        assert_eq!(tail.after, 1004);
    }

    #[test]
    fn a_row_committed_between_the_look_back_and_the_window_is_printed_by_the_window_only() {
        // 6 committed after `Before` was read and before the window: the window printed it.
        let mut tail = Before { newest: 5, visible: vec![4, 5] }.tail(&[6, 5], true);
        assert_eq!(ids(&tail.take(vec![entry(4), entry(5), entry(6), entry(7)], i64::MAX)), [7]);
    }

    #[test]
    fn the_tail_looks_back_at_most_a_batch_below_the_newest_id() {
        assert_eq!(furthest_back(0), 0, "an empty log");
        assert_eq!(furthest_back(FOLLOW_BATCH - 1), 0);
        assert_eq!(furthest_back(10_000), 10_000 - FOLLOW_BATCH);
        let tail = Before { newest: 10_000, visible: vec![9_990, 10_000] }.tail(&[10_000, 9_000], false);
        assert_eq!(tail.already_visible.len(), 2, "a window entry below the look-back is never read again");
    }

    #[test]
    fn in_order_the_tail_prints_at_once_and_skips_the_window() {
        let mut tail = Before { newest: 5, visible: vec![4, 5] }.tail(&[5, 4], true);
        let up_to = tail.up_to(Instant::now(), i64::MAX);
        assert_eq!(ids(&tail.take(vec![entry(4), entry(5), entry(6)], up_to)), [6]);
        assert_eq!(ids(&tail.take(vec![entry(7)], up_to)), [7]);
    }
}
