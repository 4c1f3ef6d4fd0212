//! One page of an admin list, searched and paged in SQL, and the dashboard's counts: each costs
//! about the same with a thousand rows as with a million.
//!
//! - **No filter without a search.** An empty search adds no `WHERE` at all, so the first page
//!   is the first rows of an index.
//! - **Keyset pages.** A page starts after the sort key of the previous page's last row (a
//!   [`Cursor`], carried in the `after` parameter), compared as a row value
//!   (`(created_at, id) < ($k, $i)`), which both databases answer from the list's index; there
//!   is no `OFFSET`, so a deep page costs what the first does.
//! - **No count per page.** A page reads one row more than it shows to know whether there is a
//!   next one.
//! - **Counts that stop.** The dashboard counts exactly up to [`COUNT_CAP`]; a whole table past
//!   that is estimated by the database ([`Count::About`]), a filtered count says
//!   [`Count::AtLeast`].
//!
//! A search is one bound `LIKE` pattern (`%` and `_` typed by the admin are escaped, so they
//! match themselves) compared with `LOWER(<the row's searchable text>)`. Letters A–Z match in
//! either case on both databases; other letters are lowered by PostgreSQL but not by SQLite's
//! built-in `LOWER`, so there an uppercase `Ż` in the data matches only `Ż` typed.
//! Each list's searchable text is built in its own store module (`search_*` constants) from the
//! columns its page shows, and rows also match by their user's name ([`USER_MATCHES`]). A
//! search still reads rows until it has a page of matches, so a rare term costs a scan.
//!
//! SQL here names its parameters `{q}` (the pattern), `{now}`, `{k}`/`{i}`/`{j}` (the cursor)
//! and `{limit}`; [`numbered`] turns them into `$n` in the order they appear.

use sqlx::any::AnyRow;

use super::{Backend, FetchIn, Store, StoreResult};

/// A search, as the `LIKE` pattern a list binds as `{q}`; none for an empty search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search(Option<String>);

impl Search {
    /// Rows whose searchable text contains `q` (trimmed; empty matches every row).
    pub fn new(q: &str) -> Self {
        let q = q.trim();
        if q.is_empty() {
            return Search(None);
        }
        let mut pattern = String::from("%");
        for c in q.to_lowercase().chars() {
            if matches!(c, '\\' | '%' | '_') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        pattern.push('%');
        Search(Some(pattern))
    }

    /// The `LIKE` pattern, or `None` when every row matches.
    pub fn pattern(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

/// Where a page starts: after the row with this sort key. `key` is the list's number column
/// (a time, or the audit id), `id` and `id2` its text tie-breakers (empty where unused).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cursor {
    pub key: i64,
    pub id: String,
    pub id2: String,
}

impl Cursor {
    pub fn new(key: i64, id: impl Into<String>) -> Self {
        Cursor { key, id: id.into(), id2: String::new() }
    }

    /// As the `after` parameter: `key:id:id2` (`id2` may itself hold `:`; `id` never does).
    pub fn to_text(&self) -> String {
        match (self.id.is_empty(), self.id2.is_empty()) {
            (true, true) => self.key.to_string(),
            (_, true) => format!("{}:{}", self.key, self.id),
            _ => format!("{}:{}:{}", self.key, self.id, self.id2),
        }
    }

    /// The `after` parameter back; `None` if it is not one.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.splitn(3, ':');
        let key = parts.next()?.parse().ok()?;
        let id = parts.next().unwrap_or_default().to_owned();
        let id2 = parts.next().unwrap_or_default().to_owned();
        if id.is_empty() && !id2.is_empty() {
            return None;
        }
        Some(Cursor { key, id, id2 })
    }
}

/// Which rows of the matching ones: the first `limit` after `after` (from the start if none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub limit: i64,
    pub after: Option<Cursor>,
}

impl Window {
    /// The first `size` rows.
    pub fn first(size: usize) -> Self {
        Window { limit: i64::try_from(size).unwrap_or(i64::MAX), after: None }
    }

    /// `size` rows after `cursor`.
    pub fn after(size: usize, cursor: Cursor) -> Self {
        Window { after: Some(cursor), ..Window::first(size) }
    }
}

/// One page of rows and, when more match, where the next page starts.
#[derive(Debug, Clone)]
pub struct Paged<T> {
    pub rows: Vec<T>,
    pub next: Option<Cursor>,
}

impl<T> Paged<T> {
    /// The same page with each row converted (a raw row into its checked form).
    pub fn try_map<U>(self, f: impl FnMut(T) -> StoreResult<U>) -> StoreResult<Paged<U>> {
        Ok(Paged { rows: self.rows.into_iter().map(f).collect::<StoreResult<_>>()?, next: self.next })
    }
}

/// Rows whose `user_id` names a user whose username, display name or subject matches `{q}`.
pub const USER_MATCHES: &str = "user_id IN (SELECT id FROM users WHERE LOWER(COALESCE(username, '') || ' ' || COALESCE(display_name, '') || ' ' || subject) LIKE {q} ESCAPE '\\')";

/// The parts of one list's statement. `filter` (used only for a search) may use `{q}` and
/// `{now}`; `after` (used only past the first page) is the keyset condition on `{k}`, `{i}`,
/// `{j}`, in the same order and direction as `order`, which an index of the table serves.
pub(crate) struct ListSql<'a> {
    pub columns: &'a str,
    pub from: &'a str,
    pub filter: &'a str,
    pub order: &'a str,
    pub after: &'a str,
}

/// A value bound to a named parameter.
enum Bound<'a> {
    Text(&'a str),
    Int(i64),
}

/// `sql` with each `{name}` replaced by `$n` (numbered by first appearance), and the names
/// in that order. Other braces are left alone.
pub(crate) fn numbered(sql: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(sql.len());
    let mut names: Vec<String> = Vec::new();
    let mut rest = sql;
    while let Some(open) = rest.find('{') {
        let after_open = &rest[open + 1..];
        let close = after_open.find('}');
        let name = close.map(|c| &after_open[..c]);
        match name {
            Some(name) if !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_') => {
                out.push_str(&rest[..open]);
                let n = match names.iter().position(|known| known == name) {
                    Some(i) => i + 1,
                    None => {
                        names.push(name.to_owned());
                        names.len()
                    }
                };
                out.push_str(&format!("${n}"));
                rest = &after_open[name.len() + 1..];
            }
            _ => {
                out.push_str(&rest[..=open]);
                rest = after_open;
            }
        }
    }
    out.push_str(rest);
    (out, names)
}

/// Dashboard counts are exact up to this many; past it they are estimates or lower bounds.
pub const COUNT_CAP: i64 = 10_000;

/// A dashboard count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    Exact(i64),
    /// The database's estimate of a whole table's rows (past [`COUNT_CAP`]).
    About(i64),
    /// More than this many match (a filtered count past [`COUNT_CAP`]).
    AtLeast(i64),
}

impl Count {
    /// As the dashboard shows it: `12`, `about 1,000,000`, `more than 10,000`.
    pub fn shown(self) -> String {
        match self {
            Count::Exact(n) => grouped(n),
            Count::About(n) => format!("about {}", grouped(n)),
            Count::AtLeast(n) => format!("more than {}", grouped(n)),
        }
    }

    /// The number (exact, estimated, or the lower bound).
    pub fn value(self) -> i64 {
        match self {
            Count::Exact(n) | Count::About(n) | Count::AtLeast(n) => n,
        }
    }
}

/// `1234567` as `1,234,567`.
fn grouped(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

impl Store {
    /// One page of `SELECT columns FROM from [WHERE filter AND after] ORDER BY order`, and the
    /// cursor of its last row (`key` gives a row's) when more rows follow.
    pub(crate) async fn paged<R>(
        &self,
        sql: ListSql<'_>,
        search: &Search,
        now: Option<i64>,
        window: Window,
        key: impl Fn(&R) -> Cursor,
    ) -> StoreResult<Paged<R>>
    where
        R: for<'r> sqlx::FromRow<'r, AnyRow> + Send + Unpin,
    {
        let ListSql { columns, from, filter, order, after } = sql;
        let mut conditions = Vec::new();
        if search.pattern().is_some() {
            conditions.push(filter);
        }
        if window.after.is_some() {
            conditions.push(after);
        }
        let filter = if conditions.is_empty() { String::new() } else { format!(" WHERE {}", conditions.join(" AND ")) };
        let (text, names) = numbered(&format!("SELECT {columns} FROM {from}{filter} ORDER BY {order} LIMIT {{limit}}"));
        let cursor = window.after.clone().unwrap_or_default();
        let mut query = sqlx::query_as::<_, R>(&text);
        for name in &names {
            let value = match name.as_str() {
                "q" => Bound::Text(search.pattern().unwrap_or_default()),
                "now" => Bound::Int(now.unwrap_or_default()),
                "k" => Bound::Int(cursor.key),
                "i" => Bound::Text(&cursor.id),
                "j" => Bound::Text(&cursor.id2),
                "limit" => Bound::Int(window.limit.saturating_add(1)),
                other => unreachable!("list SQL names an unknown parameter {other}"),
            };
            query = match value {
                Bound::Text(text) => query.bind(text.to_owned()),
                Bound::Int(n) => query.bind(n),
            };
        }
        let mut rows = query.fetch_all_in(self.read()).await?;
        let shown = usize::try_from(window.limit).unwrap_or(usize::MAX);
        let next = if rows.len() > shown {
            rows.truncate(shown);
            rows.last().map(key)
        } else {
            None
        };
        Ok(Paged { rows, next })
    }

    /// `SELECT COUNT(*) FROM table [WHERE filter]`, reading at most [`COUNT_CAP`] + 1 rows;
    /// past the cap a whole table is estimated, a filtered count is a lower bound.
    async fn capped_count(&self, table: &str, filter: Option<&str>, now: i64) -> StoreResult<Count> {
        let filter = filter.map_or(String::new(), |f| format!(" WHERE {f}"));
        let (sql, names) =
            numbered(&format!("SELECT COUNT(*) FROM (SELECT 1 FROM {table}{filter} LIMIT {{limit}}) capped"));
        let mut query = sqlx::query_as::<_, (i64,)>(&sql);
        for name in &names {
            query = query.bind(if name == "now" { now } else { COUNT_CAP + 1 });
        }
        let (n,) = query.fetch_one_in(self.read()).await?;
        if n <= COUNT_CAP {
            return Ok(Count::Exact(n));
        }
        if !filter.is_empty() {
            return Ok(Count::AtLeast(COUNT_CAP));
        }
        Ok(Count::About(self.estimated_rows(table).await?.max(n)))
    }

    /// The database's estimate of a table's rows: PostgreSQL's planner statistics; on SQLite
    /// the largest rowid (rows ever inserted, less any deleted from the end).
    async fn estimated_rows(&self, table: &str) -> StoreResult<i64> {
        let (n,): (i64,) = match self.backend() {
            Backend::Postgres => {
                sqlx::query_as(
                    "SELECT CAST(GREATEST(reltuples, 0) AS BIGINT) FROM pg_class WHERE oid = CAST($1 AS regclass)",
                )
                .bind(table.to_owned())
                .fetch_one_in(self.read())
                .await?
            }
            Backend::Sqlite => {
                sqlx::query_as(&format!("SELECT COALESCE(MAX(rowid), 0) FROM {table}"))
                    .fetch_one_in(self.read())
                    .await?
            }
        };
        Ok(n)
    }

    /// The dashboard's counts, each bounded (see [`Store::capped_count`]); each filter is
    /// served by an index (migration 0020). Open authorizations past their expiry count as
    /// expired, as the list shows them.
    pub async fn admin_counts(&self, now: i64) -> StoreResult<AdminCounts> {
        const OPEN: &str = "status IN ('pending', 'redirected', 'exchanging')";
        let count = |table: &'static str, filter: Option<&'static str>| self.capped_count(table, filter, now);
        Ok(AdminCounts {
            users: count("users", None).await?,
            admins: count("users", Some("is_admin <> 0")).await?,
            disabled_users: count("users", Some("disabled_at IS NOT NULL")).await?,
            grants: count("grants", None).await?,
            grants_needing_consent: count("grants", Some("status = 'needs_reconsent'")).await?,
            open_authorizations: self
                .capped_count("authorizations", Some(&format!("{OPEN} AND expires_at > {{now}}")), now)
                .await?,
            completed_authorizations: count("authorizations", Some("status = 'completed'")).await?,
            declined_authorizations: count("authorizations", Some("status = 'declined'")).await?,
            failed_authorizations: count("authorizations", Some("status = 'failed'")).await?,
            expired_authorizations: self
                .capped_count("authorizations", Some(&format!("{OPEN} AND expires_at <= {{now}}")), now)
                .await?,
            consents: count("client_consents", None).await?,
            oauth_clients: count("oauth_clients", None).await?,
            services: count("services", None).await?,
        })
    }
}

/// What the admin dashboard counts.
#[derive(Debug, Clone, Copy)]
pub struct AdminCounts {
    pub users: Count,
    pub admins: Count,
    pub disabled_users: Count,
    pub grants: Count,
    pub grants_needing_consent: Count,
    pub open_authorizations: Count,
    pub completed_authorizations: Count,
    pub declined_authorizations: Count,
    pub failed_authorizations: Count,
    pub expired_authorizations: Count,
    pub consents: Count,
    pub oauth_clients: Count,
    pub services: Count,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_is_a_lowercase_contains_pattern_with_like_wildcards_escaped() {
        assert_eq!(Search::new("").pattern(), None);
        assert_eq!(Search::new("  ").pattern(), None);
        assert_eq!(Search::new("ALICE").pattern(), Some("%alice%"));
        assert_eq!(Search::new("100%_a\\b").pattern(), Some("%100\\%\\_a\\\\b%"));
    }

    #[test]
    fn a_cursor_reads_back_what_it_wrote() {
        for cursor in [
            Cursor::new(42, ""),
            Cursor::new(-7, "u-1"),
            Cursor { key: 1700000000, id: "g1".into(), id2: "client:abc:def".into() },
        ] {
            assert_eq!(Cursor::parse(&cursor.to_text()), Some(cursor.clone()), "{}", cursor.to_text());
        }
        for bad in ["", "x", "1.5", "12a:b", "99999999999999999999", "1::x"] {
            assert_eq!(Cursor::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn named_parameters_are_numbered_by_first_appearance() {
        let (sql, names) = numbered("a = {q} OR b = {q} AND (c, d) < ({k}, {i}) LIMIT {limit} {} {Not}");
        assert_eq!(sql, "a = $1 OR b = $1 AND (c, d) < ($2, $3) LIMIT $4 {} {Not}");
        assert_eq!(names, vec!["q", "k", "i", "limit"]);
    }

    #[test]
    fn counts_read_as_exact_estimated_or_at_least() {
        assert_eq!(Count::Exact(12).shown(), "12");
        assert_eq!(Count::About(1_234_567).shown(), "about 1,234,567");
        assert_eq!(Count::AtLeast(10_000).shown(), "more than 10,000");
    }
}
