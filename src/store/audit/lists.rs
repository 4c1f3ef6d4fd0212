//! The admin lists' filters and sort orders: each one fixed SQL on an indexed
//! column, chosen from a closed set (never typed text), and combined with the text search
//! (`store::paging`, `store::search`):
//!
//! - without a search, a filtered page is the first rows of the index that leads with the
//!   filter, by keyset, so a page deep in a million rows costs what the first does;
//! - with one, the search narrows by its text indexes and the filter keeps, of the rows they
//!   yield, those it admits (the probe reads the filtered rows in the index's order first).
//!
//! The filters:
//! - audit log: by outcome (`audit_log_outcome (outcome, id)`), newest or oldest first (`id`);
//! - authorizations: by status as the list shows it (an open attempt past its expiry reads
//!   `expired`), served by `authorizations_status_created (status, created_at, id)` (migration
//!   0028) and `authorizations_status (status, expires_at)`, newest first.

use crate::clock::Timestamp;
use crate::store::audit::log::{AUDIT_COLUMNS, AUDIT_TEXT, AuditEntry, BY_SHARED_TEXT, Outcome};
use crate::store::authorizations::row::{AuthorizationRow, EXPIRED_ARMS, SHOWN_STATUSES};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::paging::{Chosen, Cursor, ListSql, Paged, Search, Window};
use crate::store::machinery::search::Indexed;
use crate::store::machinery::store::Store;
use crate::store::users::accounts::BY_USER_NAME;

/// The authorization statuses a filter may name, as the list shows them.
pub const AUTHORIZATION_STATUSES: [&str; 7] = {
    let mut words = [""; 7];
    let mut i = 0;
    while i < SHOWN_STATUSES.len() {
        words[i] = SHOWN_STATUSES[i].0;
        i += 1;
    }
    words
};

/// How the audit log is narrowed and ordered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only entries with this outcome.
    pub outcome: Option<Outcome>,
    /// Oldest first instead of newest first.
    pub oldest_first: bool,
}

/// The condition for one outcome (fixed SQL; the outcome index leads with it).
fn outcome_is(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Success => "outcome = 'success'",
        Outcome::Failure => "outcome = 'failure'",
        Outcome::Refused => "outcome = 'refused'",
    }
}

/// The condition for one shown status, or `None` for a word that is not one. `expired` spans
/// three stored statuses, read one by one ([`Chosen::AnyOf`]).
fn shown_status_is(status: &str) -> Option<Chosen> {
    let sql = SHOWN_STATUSES.iter().find(|(word, _)| *word == status).map(|(_, sql)| *sql)?;
    Some(match status {
        "expired" => Chosen::AnyOf(&EXPIRED_ARMS),
        // Open and not yet expired: a few minutes' worth of attempts among every one abandoned.
        "pending" | "redirected" | "exchanging" => Chosen::Few(sql),
        _ => Chosen::One(sql),
    })
}

impl Store {
    /// One page of audit entries matching `search`, newest first.
    pub async fn page_audit(&self, search: &Search, window: Window) -> StoreResult<Paged<AuditEntry>> {
        self.page_audit_filtered(search, AuditFilter::default(), window).await
    }

    /// One page of authorizations matching `search` at `now`, newest first.
    pub async fn page_authorizations(
        &self,
        search: &Search,
        now: Timestamp,
        window: Window,
    ) -> StoreResult<Paged<AuthorizationRow>> {
        self.page_authorizations_filtered(search, None, now, window).await
    }

    /// Audit entries matching `search` (every one when empty), narrowed and ordered by `filter`.
    pub async fn page_audit_filtered(
        &self,
        search: &Search,
        filter: AuditFilter,
        window: Window,
    ) -> StoreResult<Paged<AuditEntry>> {
        let (order, after) = if filter.oldest_first { ("id ASC", "id > {k}") } else { ("id DESC", "id < {k}") };
        let sql = ListSql {
            columns: AUDIT_COLUMNS,
            from: "audit_log",
            filter: "",
            indexed: Some(Indexed { own: AUDIT_TEXT, via: &[BY_USER_NAME, BY_SHARED_TEXT], extra: Vec::new() }),
            chosen: filter.outcome.map(|o| Chosen::One(outcome_is(o))),
            order,
            after,
        };
        self.paged(sql, search, None, window, |e: &AuditEntry| Cursor::new(e.id, "")).await
    }

    /// Authorizations matching `search` at `now` (every one when empty) whose status, as the
    /// list shows it, is `status` (any when `None`; a word not in [`AUTHORIZATION_STATUSES`]
    /// matches nothing), newest first.
    pub async fn page_authorizations_filtered(
        &self,
        search: &Search,
        status: Option<&str>,
        now: Timestamp,
        window: Window,
    ) -> StoreResult<Paged<AuthorizationRow>> {
        let chosen = match status {
            None => None,
            Some(status) => match shown_status_is(status) {
                Some(sql) => Some(sql),
                None => return Ok(Paged { rows: Vec::new(), next: None }),
            },
        };
        self.page_authorizations_with(search, chosen, now, window).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_filter_is_fixed_sql_on_one_indexed_column() {
        assert_eq!(
            AUTHORIZATION_STATUSES,
            ["pending", "redirected", "exchanging", "completed", "declined", "failed", "expired"]
        );
        assert_eq!(shown_status_is("completed"), Some(Chosen::One("status = 'completed'")));
        assert_eq!(shown_status_is("expired"), Some(Chosen::AnyOf(&EXPIRED_ARMS)));
        assert_eq!(shown_status_is("pending"), Some(Chosen::Few("(status = 'pending' AND expires_at > {now})")));
        assert_eq!(shown_status_is("completed'--"), None);
        assert_eq!(outcome_is(Outcome::Refused), "outcome = 'refused'");
    }
}
