//! The admin authorizations list: searched by text, by the user's name and by the status as
//! people read it (an open attempt past its expiry reads `expired`), filtered by that shown
//! status, newest first. The filters are fixed SQL served by the status indexes
//! (`authorizations_status_created (status, created_at, id)`, migration 0028, and
//! `authorizations_status (status, expires_at)`).

use crate::clock::Timestamp;
use crate::store::authorizations::row::AUTHZ_COLUMNS;
use crate::store::authorizations::row::AuthorizationRow;
use crate::store::authorizations::row::Authorizations;
use crate::store::authorizations::row::RawAuthorizationRow;
use crate::store::machinery::counts::Count;
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::paging::{Chosen, Cursor, ListSql, Paged, Search, Window};
use crate::store::machinery::search::{Indexed, TextIndex};
use crate::store::users::list::BY_USER_NAME;

/// What the admin authorizations list searches besides the shown status and the user's name
/// (see `search`).
const AUTHORIZATION_TEXT: TextIndex = TextIndex {
    table: "authorizations",
    text: "LOWER(provider || ' ' || kind || ' ' || COALESCE(client_name, '') || ' ' || client_key || ' ' || scopes || ' ' || COALESCE(failure, '') || ' ' || id)",
    fts: "authorizations_search",
    column: "text",
    partial: None,
};

/// Each status as the list shows it at `{now}` ([`AuthorizationRow::shown_status`]: an open
/// attempt past its expiry reads `expired`), as fixed SQL served by the status indexes.
pub(in crate::store) const SHOWN_STATUSES: [(&str, &str); 7] = [
    ("pending", "(status = 'pending' AND expires_at > {now})"),
    ("redirected", "(status = 'redirected' AND expires_at > {now})"),
    ("exchanging", "(status = 'exchanging' AND expires_at > {now})"),
    ("completed", "status = 'completed'"),
    ("declined", "status = 'declined'"),
    ("failed", "status = 'failed'"),
    ("expired", "(status IN ('pending', 'redirected', 'exchanging') AND expires_at <= {now})"),
];

/// `expired` as a filter: the open statuses past their expiry, one condition per status so
/// each is an ordered read of `authorizations_status_created` (`store::paging::Chosen`).
pub(in crate::store) const EXPIRED_ARMS: [&str; 3] = [
    "(status = 'pending' AND expires_at <= {now})",
    "(status = 'redirected' AND expires_at <= {now})",
    "(status = 'exchanging' AND expires_at <= {now})",
];

/// The rows whose shown status contains `term`.
fn shown_status_matches(term: &str) -> Vec<&'static str> {
    SHOWN_STATUSES.iter().filter(|(word, _)| word.contains(term)).map(|(_, sql)| *sql).collect()
}

impl Authorizations<'_> {
    /// One page of authorizations matching `search` at `now`, newest first, of those
    /// `chosen` admits (a shown status, [`Authorizations::page_filtered`]).
    async fn page_with(
        self,
        search: &Search,
        chosen: Option<Chosen>,
        now: Timestamp,
        window: Window,
    ) -> StoreResult<Paged<AuthorizationRow>> {
        let extra = shown_status_matches(search.term().unwrap_or_default());
        let sql = ListSql {
            columns: AUTHZ_COLUMNS,
            from: "authorizations",
            filter: "",
            indexed: Some(Indexed { own: AUTHORIZATION_TEXT, via: &[BY_USER_NAME], extra }),
            chosen,
            order: "created_at DESC, id DESC",
            after: "(created_at, id) < ({k}, {i})",
        };
        let key = |a: &RawAuthorizationRow| Cursor::new(a.created_at, a.id.clone());
        self.store.paged(sql, search, Some(now), window, key).await?.try_map(AuthorizationRow::try_from)
    }
}

/// The dashboard's counts of authorizations, by the status as the list shows it.
pub(in crate::store) struct AuthorizationCounts {
    pub(in crate::store) open: Count,
    pub(in crate::store) completed: Count,
    pub(in crate::store) declined: Count,
    pub(in crate::store) failed: Count,
    pub(in crate::store) expired: Count,
}

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

impl Authorizations<'_> {
    /// The dashboard's counts at `now`, each bounded ([`crate::store::machinery::counts`]) and
    /// served by an index (migration 0020). Open authorizations past their expiry count as
    /// expired, as the list shows them.
    pub(in crate::store) async fn counts(self, now: Timestamp) -> StoreResult<AuthorizationCounts> {
        const OPEN: &str = "status IN ('pending', 'redirected', 'exchanging')";
        let count = |filter: String| async move { self.store.capped_count("authorizations", Some(&filter), now).await };
        Ok(AuthorizationCounts {
            open: count(format!("{OPEN} AND expires_at > {{now}}")).await?,
            completed: count("status = 'completed'".into()).await?,
            declined: count("status = 'declined'".into()).await?,
            failed: count("status = 'failed'".into()).await?,
            expired: count(format!("{OPEN} AND expires_at <= {{now}}")).await?,
        })
    }

    /// One page of authorizations matching `search` at `now`, newest first.
    pub async fn page(self, search: &Search, now: Timestamp, window: Window) -> StoreResult<Paged<AuthorizationRow>> {
        self.page_filtered(search, None, now, window).await
    }

    /// Authorizations matching `search` at `now` (every one when empty) whose status, as the
    /// list shows it, is `status` (any when `None`; a word not in [`AUTHORIZATION_STATUSES`]
    /// matches nothing), newest first.
    pub async fn page_filtered(
        self,
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
        self.page_with(search, chosen, now, window).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_filter_is_fixed_sql_on_one_indexed_column() {
        assert_eq!(
            AUTHORIZATION_STATUSES,
            ["pending", "redirected", "exchanging", "completed", "declined", "failed", "expired"]
        );
        assert_eq!(shown_status_is("completed"), Some(Chosen::One("status = 'completed'")));
        assert_eq!(shown_status_is("expired"), Some(Chosen::AnyOf(&EXPIRED_ARMS)));
        assert_eq!(shown_status_is("pending"), Some(Chosen::Few("(status = 'pending' AND expires_at > {now})")));
        assert_eq!(shown_status_is("completed'--"), None);
    }
}
