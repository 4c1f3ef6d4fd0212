//! One page of an admin list, searched and counted in SQL (issue 10): the admin pages and
//! their tests read a page and the number of matching rows, never a whole table.
//!
//! A search is one bound `LIKE` pattern (`%` and `_` typed by the admin are escaped, so they
//! match themselves) compared with `LOWER(<the row's searchable text>)`. Letters A–Z match in
//! either case on both databases; other letters are lowered by PostgreSQL but not by SQLite's
//! built-in `LOWER`, so there an uppercase `Ż` in the data matches only `Ż` typed.
//! Each list's searchable text is built in its own store module (`search_*` constants) from the
//! columns its page shows, and rows also match by their user's name ([`USER_MATCHES`]).
//! The count and the page are two statements: a row written between them can make the count
//! one off, which a reload corrects.

use sqlx::any::AnyRow;

use super::{FetchIn, Store, StoreResult};

/// A search, as the `LIKE` pattern every list binds as `$1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search(String);

impl Search {
    /// Rows whose searchable text contains `q` (trimmed; empty matches every row).
    pub fn new(q: &str) -> Self {
        let mut pattern = String::from("%");
        for c in q.trim().to_lowercase().chars() {
            if matches!(c, '\\' | '%' | '_') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        if pattern.len() > 1 {
            pattern.push('%');
        }
        Search(pattern)
    }

    pub fn pattern(&self) -> &str {
        &self.0
    }
}

/// Which rows of the matching ones: `limit` rows after skipping `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub limit: i64,
    pub offset: i64,
}

impl Window {
    /// Page `page` (from 1) of `size` rows.
    pub fn page(page: usize, size: usize) -> Self {
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        let skip = i64::try_from(page.saturating_sub(1)).unwrap_or(i64::MAX);
        Window { limit: size, offset: skip.saturating_mul(size) }
    }
}

/// One page of rows and how many match in all.
#[derive(Debug, Clone)]
pub struct Paged<T> {
    pub rows: Vec<T>,
    pub total: i64,
}

/// Rows whose `user_id` names a user whose username, display name or subject matches `$1`.
pub const USER_MATCHES: &str = "user_id IN (SELECT id FROM users WHERE LOWER(COALESCE(username, '') || ' ' || COALESCE(display_name, '') || ' ' || subject) LIKE $1 ESCAPE '\\')";

/// The parts of one list's two statements. `filter` may use `$1` (the search) and, when
/// `now` is given, `$2`.
pub(crate) struct ListSql<'a> {
    pub columns: &'a str,
    pub from: &'a str,
    pub filter: &'a str,
    pub order: &'a str,
}

impl Store {
    /// The count and one page of `SELECT columns FROM from WHERE filter ORDER BY order`.
    pub(crate) async fn paged<R>(
        &self,
        sql: ListSql<'_>,
        search: &Search,
        now: Option<i64>,
        window: Window,
    ) -> StoreResult<Paged<R>>
    where
        R: for<'r> sqlx::FromRow<'r, AnyRow> + Send + Unpin,
    {
        let ListSql { columns, from, filter, order } = sql;
        let (limit, offset) = if now.is_some() { ("$3", "$4") } else { ("$2", "$3") };
        let count_sql = format!("SELECT COUNT(*) FROM {from} WHERE {filter}");
        let mut count = sqlx::query_as::<_, (i64,)>(&count_sql).bind(search.pattern());
        if let Some(now) = now {
            count = count.bind(now);
        }
        let (total,) = count.fetch_one_in(self.read()).await?;
        let page_sql =
            format!("SELECT {columns} FROM {from} WHERE {filter} ORDER BY {order} LIMIT {limit} OFFSET {offset}");
        let mut page = sqlx::query_as::<_, R>(&page_sql).bind(search.pattern());
        if let Some(now) = now {
            page = page.bind(now);
        }
        let rows = page.bind(window.limit).bind(window.offset).fetch_all_in(self.read()).await?;
        Ok(Paged { rows, total })
    }

    /// One number per dashboard count, each a `COUNT(*)` (open authorizations past their
    /// expiry count as expired, as the list shows them).
    pub async fn admin_counts(&self, now: i64) -> StoreResult<AdminCounts> {
        let one = |sql: &'static str| async move {
            let (n,): (i64,) = sqlx::query_as(sql).fetch_one_in(self.read()).await?;
            StoreResult::Ok(n)
        };
        let at_now = |sql: &'static str| async move {
            let (n,): (i64,) = sqlx::query_as(sql).bind(now).fetch_one_in(self.read()).await?;
            StoreResult::Ok(n)
        };
        Ok(AdminCounts {
            users: one("SELECT COUNT(*) FROM users").await?,
            admins: one("SELECT COUNT(*) FROM users WHERE is_admin <> 0").await?,
            disabled_users: one("SELECT COUNT(*) FROM users WHERE disabled_at IS NOT NULL").await?,
            grants: one("SELECT COUNT(*) FROM grants").await?,
            grants_needing_consent: one("SELECT COUNT(*) FROM grants WHERE status = 'needs_reconsent'").await?,
            open_authorizations: at_now(
                "SELECT COUNT(*) FROM authorizations WHERE status IN ('pending', 'redirected', 'exchanging') AND expires_at > $1",
            )
            .await?,
            completed_authorizations: one("SELECT COUNT(*) FROM authorizations WHERE status = 'completed'").await?,
            declined_authorizations: one("SELECT COUNT(*) FROM authorizations WHERE status = 'declined'").await?,
            failed_authorizations: one("SELECT COUNT(*) FROM authorizations WHERE status = 'failed'").await?,
            expired_authorizations: at_now(
                "SELECT COUNT(*) FROM authorizations WHERE status IN ('pending', 'redirected', 'exchanging') AND expires_at <= $1",
            )
            .await?,
            consents: one("SELECT COUNT(*) FROM client_consents").await?,
            oauth_clients: one("SELECT COUNT(*) FROM oauth_clients").await?,
            services: one("SELECT COUNT(*) FROM services").await?,
        })
    }
}

/// What the admin dashboard counts.
#[derive(Debug, Clone, Copy, Default)]
pub struct AdminCounts {
    pub users: i64,
    pub admins: i64,
    pub disabled_users: i64,
    pub grants: i64,
    pub grants_needing_consent: i64,
    pub open_authorizations: i64,
    pub completed_authorizations: i64,
    pub declined_authorizations: i64,
    pub failed_authorizations: i64,
    pub expired_authorizations: i64,
    pub consents: i64,
    pub oauth_clients: i64,
    pub services: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_is_a_lowercase_contains_pattern_with_like_wildcards_escaped() {
        assert_eq!(Search::new("").pattern(), "%");
        assert_eq!(Search::new("  ").pattern(), "%");
        assert_eq!(Search::new("ALICE").pattern(), "%alice%");
        assert_eq!(Search::new("100%_a\\b").pattern(), "%100\\%\\_a\\\\b%");
    }

    #[test]
    fn a_window_skips_whole_pages() {
        assert_eq!(Window::page(1, 20), Window { limit: 20, offset: 0 });
        assert_eq!(Window::page(3, 20), Window { limit: 20, offset: 40 });
        assert_eq!(Window::page(0, 20), Window { limit: 20, offset: 0 });
    }
}
