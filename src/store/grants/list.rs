//! The admin grants list, searched and paged ([`crate::store::machinery::paging`]), and the
//! grants' text other lists match their rows by.

use crate::store::machinery::error::StoreResult;
use crate::store::machinery::paging::{Cursor, ListSql, Paged, Search, Window};
use crate::store::machinery::search::{Indexed, TextIndex, Via};

use crate::store::grants::row::GRANT_COLUMNS;
use crate::store::grants::row::GrantRow;
use crate::store::grants::row::Grants;
use crate::store::grants::row::RawGrantRow;
use crate::store::machinery::counts::Count;
use crate::store::users::list::BY_USER_NAME;

/// What the grants list searches (consents also match by their grant's).
pub(in crate::store) const GRANT_TEXT: TextIndex = TextIndex {
    table: "grants",
    text: "LOWER(provider || ' ' || COALESCE(account_label, '') || ' ' || status || ' ' || scopes || ' ' || id)",
    fts: "grants_search",
    column: "text",
    partial: None,
};

/// A row whose `grant_id` names a grant whose text holds the term matches.
pub(in crate::store) const BY_GRANT_TEXT: Via = Via { index: GRANT_TEXT, column: "grant_id", prefix: 'g' };

impl Grants<'_> {
    /// Every grant, for the dashboard (bounded: [`crate::store::machinery::counts`]).
    pub(in crate::store) async fn count(self) -> StoreResult<Count> {
        self.store.capped_count("grants", None, 0).await
    }

    /// The grants that need a new consent.
    pub(in crate::store) async fn count_needing_consent(self) -> StoreResult<Count> {
        self.store.capped_count("grants", Some("status = 'needs_reconsent'"), 0).await
    }

    /// One page of grants matching `search`, newest first.
    pub async fn page(self, search: &Search, window: Window) -> StoreResult<Paged<GrantRow>> {
        // Provider, account, status, scopes, id, and the user's name (see `search`).
        let sql = ListSql {
            columns: GRANT_COLUMNS,
            from: "grants",
            filter: "",
            indexed: Some(Indexed { own: GRANT_TEXT, via: &[BY_USER_NAME], extra: Vec::new() }),
            chosen: None,
            order: "created_at DESC, id DESC",
            after: "(created_at, id) < ({k}, {i})",
        };
        let key = |g: &RawGrantRow| Cursor::new(g.created_at, g.id.clone());
        self.store.paged(sql, search, None, window, key).await?.try_map(GrantRow::try_from)
    }
}
