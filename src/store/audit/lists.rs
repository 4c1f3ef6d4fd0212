//! The admin audit list: searched by its text, by the user's name and by the texts it shares
//! with rows like it, filtered by outcome (`audit_log_outcome (outcome, id)`), newest or oldest
//! first (`id`). Each filter is fixed SQL on an indexed column, chosen from a closed set (never
//! typed text), and combined with the text search ([`crate::store::machinery::paging`],
//! [`crate::store::machinery::search`]):
//!
//! - without a search, a filtered page is the first rows of the index that leads with the
//!   filter, by keyset, so a page deep in a million rows costs what the first does;
//! - with one, the search narrows by its text indexes and the filter keeps, of the rows they
//!   yield, those it admits (the probe reads the filtered rows in the index's order first).

use crate::store::audit::log::Audit;
use crate::store::audit::log::{AUDIT_COLUMNS, AuditEntry, Outcome};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::paging::{Chosen, Cursor, ListSql, Paged, Search, Window};
use crate::store::machinery::search::Indexed;
use crate::store::machinery::search::TextIndex;
use crate::store::machinery::search::Via;
use crate::store::users::list::BY_USER_NAME;

/// What the admin audit list searches: action, actor, outcome, provider, detail, and the
/// user's name (see `search`). Rows written in batches (token-API answers) share their text
/// through `audit_texts` ([`BY_SHARED_TEXT`]); the index on this expression holds only the others.
pub(in crate::store) const AUDIT_TEXT: TextIndex = TextIndex {
    table: "audit_log",
    text: "LOWER(action || ' ' || COALESCE(actor, '') || ' ' || COALESCE(outcome, '') || ' ' || COALESCE(provider, '') || ' ' || COALESCE(detail, ''))",
    fts: "audit_log_search",
    column: "text",
    partial: Some("text_id IS NULL"),
};

/// The distinct texts of audit rows written in batches (token-API answers, migration 0032):
/// such a row names its text by `text_id` and is not in the audit log's own text index.
pub(in crate::store) const AUDIT_TEXTS: TextIndex =
    TextIndex { table: "audit_texts", text: "text", fts: "audit_texts_search", column: "text", partial: None };

/// An audit row whose `text_id` names a shared text that holds the term matches.
pub(in crate::store) const BY_SHARED_TEXT: Via = Via { index: AUDIT_TEXTS, column: "text_id", prefix: 't' };

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

impl Audit<'_> {
    /// One page of audit entries matching `search`, newest first.
    pub async fn page(self, search: &Search, window: Window) -> StoreResult<Paged<AuditEntry>> {
        self.page_filtered(search, AuditFilter::default(), window).await
    }

    /// Audit entries matching `search` (every one when empty), narrowed and ordered by `filter`.
    pub async fn page_filtered(
        self,
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
        self.store.paged(sql, search, None, window, |e: &AuditEntry| Cursor::new(e.id, "")).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_filter_is_fixed_sql_on_one_indexed_column() {
        assert_eq!(outcome_is(Outcome::Refused), "outcome = 'refused'");
    }
}
