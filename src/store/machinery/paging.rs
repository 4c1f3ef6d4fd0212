//! One page of an admin list, searched and paged in SQL: each costs about the same with a
//! thousand rows as with a million (the dashboard's counts are [`super::counts`]').
//!
//! - **No filter without a search.** An empty search adds no `WHERE` at all, so the first page
//!   is the first rows of an index.
//! - **Keyset pages.** A page starts after the sort key of the previous page's last row (a
//!   [`Cursor`], carried in the `after` parameter), compared as a row value
//!   (`(created_at, id) < ($k, $i)`), which both databases answer from the list's index; there
//!   is no `OFFSET`, so a deep page costs what the first does.
//! - **No count per page.** A page reads one row more than it shows to know whether there is a
//!   next one.
//!
//! A search is one bound `LIKE` pattern (`%` and `_` typed by the admin are escaped, so they
//! match themselves) compared with `LOWER(<the row's searchable text>)`. Letters A–Z match in
//! either case on both databases; other letters are lowered by PostgreSQL but not by SQLite's
//! built-in `LOWER`, so there an uppercase `Ż` in the data matches only `Ż` typed.
//! The big lists (users, grants, authorizations, consents, audit) describe their search as an
//! [`Indexed`] one, which [`super::search`] answers through text indexes; the small ones
//! (services, clients, servers) keep a `filter` read row by row.
//!
//! SQL here names its parameters `{q}` (the pattern), `{m}` (the FTS5 phrase), `{now}`,
//! `{k}`/`{i}`/`{j}` (the cursor), `{limit}`, `{probe}`, `{cap}` and `{u0}`…/`{g0}`… (ids);
//! [`numbered`] turns them into `$n` in the order they appear.

use sqlx::any::AnyRow;

use crate::store::machinery::cache_effect::FetchIn;
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::placeholders::numbered;
use crate::store::machinery::search::{Indexed, MAX_VIA_IDS, MIN_INDEXED_CHARS, PROBE_ROWS, Via, fts_phrase};
use crate::store::machinery::store::{Backend, Store};

/// A search: the term (trimmed, lowercased) and the `LIKE` pattern a list binds as `{q}`;
/// none for an empty search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search(Option<(String, String)>);

impl Search {
    /// Rows whose searchable text contains `q` (trimmed; empty matches every row).
    pub fn new(q: &str) -> Self {
        let q = q.trim();
        if q.is_empty() {
            return Search(None);
        }
        let term = q.to_lowercase();
        let mut pattern = String::from("%");
        for c in term.chars() {
            if matches!(c, '\\' | '%' | '_') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        pattern.push('%');
        Search(Some((term, pattern)))
    }

    /// The `LIKE` pattern, or `None` when every row matches.
    pub fn pattern(&self) -> Option<&str> {
        self.0.as_ref().map(|(_, pattern)| pattern.as_str())
    }

    /// The term itself (lowercased), or `None` when every row matches.
    pub fn term(&self) -> Option<&str> {
        self.0.as_ref().map(|(term, _)| term.as_str())
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

/// The parts of one list's statement. `filter` (used only for a search, when the list has no
/// [`Indexed`] search) may use `{q}` and `{now}`; `after` (used only past the first page) is
/// the keyset condition on `{k}`, `{i}`, `{j}`, in the same order and direction as `order`,
/// which an index of the table serves.
///
/// `chosen` is a filter the admin picked from the list's own choices (fixed SQL from a closed
/// set, never typed text: an audit outcome, an authorization's shown status), applied at every
/// step: without a search the page is the first rows of an index that leads with it
/// (`(outcome, id)`, `(status, created_at, id)`) or of the list's order; with one, the probe
/// reads the filtered rows in order, and the index step keeps, of the rows the text indexes
/// yield, those it admits.
pub(crate) struct ListSql<'a> {
    pub columns: &'a str,
    pub from: &'a str,
    pub filter: &'a str,
    pub indexed: Option<Indexed>,
    pub chosen: Option<Chosen>,
    pub order: &'a str,
    pub after: &'a str,
}

/// A filter the admin picked from a list's own choices (fixed SQL from a closed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chosen {
    /// One condition that an index leads with.
    One(&'static str),
    /// Any of these conditions, each led by the same index: read as one ordered read per
    /// condition, merged. Given `status IN (…)` and an order, neither database merges the
    /// ordered reads of the index: both read every match and sort them, which at a million
    /// rows (every open attempt past its expiry) takes longer than a page may.
    AnyOf(&'static [&'static str]),
    /// A condition whose matches are few, but which an index that leads with the list's order
    /// would find only by reading past every row it rejects: an open attempt not yet expired
    /// (the live ones are a few minutes' worth; the expired ones of the same status, every
    /// attempt ever abandoned). Read through the index that serves the condition itself
    /// (`(status, expires_at)`), behind a fence the planner does not see through, then sorted.
    Few(&'static str),
}

impl Chosen {
    /// The filter as one condition.
    fn condition(self) -> String {
        match self {
            Chosen::One(condition) | Chosen::Few(condition) => condition.to_owned(),
            Chosen::AnyOf(arms) => format!("({})", arms.join(" OR ")),
        }
    }
}

/// `SELECT * FROM from WHERE … ORDER BY order LIMIT limit`, of the rows `chosen` (if any) and
/// every one of `conditions` admit; for [`Chosen::AnyOf`], one such read per arm, merged; for
/// [`Chosen::Few`], the matches behind `fence`, then sorted.
fn ordered_read(
    from: &str,
    conditions: &[&str],
    chosen: Option<Chosen>,
    order: &str,
    limit: &str,
    fence: &str,
) -> String {
    match chosen {
        Some(Chosen::Few(condition)) => {
            let admitted: Vec<&str> = std::iter::once(condition).chain(conditions.iter().copied()).collect();
            format!(
                "SELECT * FROM (SELECT * FROM {from}{} {fence}) {from} ORDER BY {order} LIMIT {limit}",
                where_all(&admitted)
            )
        }
        Some(Chosen::AnyOf(arms)) => {
            let reads: Vec<String> = arms
                .iter()
                .enumerate()
                .map(|(i, arm)| {
                    let admitted: Vec<&str> = std::iter::once(*arm).chain(conditions.iter().copied()).collect();
                    format!(
                        "SELECT * FROM (SELECT * FROM {from}{} ORDER BY {order} LIMIT {limit}) arm{i}",
                        where_all(&admitted)
                    )
                })
                .collect();
            format!("SELECT * FROM ({}) {from} ORDER BY {order} LIMIT {limit}", reads.join(" UNION ALL "))
        }
        Some(Chosen::One(condition)) => {
            let admitted: Vec<&str> = std::iter::once(condition).chain(conditions.iter().copied()).collect();
            format!("SELECT * FROM {from}{} ORDER BY {order} LIMIT {limit}", where_all(&admitted))
        }
        None => format!("SELECT * FROM {from}{} ORDER BY {order} LIMIT {limit}", where_all(conditions)),
    }
}

/// Which of [`super::search`]'s steps a statement is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Reads the list in order, filtered, until a page (no search, or step 3).
    Scan,
    /// Reads the first [`PROBE_ROWS`] rows in order and filters them (step 1).
    Probe,
    /// Finds the matches through the text indexes, then sorts them (step 2).
    Index,
}

/// The values a list statement may name.
struct Binds<'a> {
    search: &'a Search,
    phrase: String,
    now: i64,
    cursor: Cursor,
    limit: i64,
    via: Vec<(Via, Vec<String>)>,
}

impl Binds<'_> {
    fn bind<'q, O>(
        &self,
        mut query: sqlx::query::QueryAs<'q, sqlx::Any, O, sqlx::any::AnyArguments<'q>>,
        names: &[String],
    ) -> sqlx::query::QueryAs<'q, sqlx::Any, O, sqlx::any::AnyArguments<'q>> {
        for name in names {
            let value = match name.as_str() {
                "q" => Bound::Text(self.search.pattern().unwrap_or_default().to_owned()),
                "m" => Bound::Text(self.phrase.clone()),
                "now" => Bound::Int(self.now),
                "k" => Bound::Int(self.cursor.key),
                "i" => Bound::Text(self.cursor.id.clone()),
                "j" => Bound::Text(self.cursor.id2.clone()),
                "limit" => Bound::Int(self.limit.saturating_add(1)),
                "probe" => Bound::Int(PROBE_ROWS),
                "cap" => Bound::Int(MAX_VIA_IDS + 1),
                other => {
                    let id = other.split_at_checked(1).and_then(|(prefix, n)| {
                        let n: usize = n.parse().ok()?;
                        let (_, ids) = self.via.iter().find(|(via, _)| prefix.starts_with(via.prefix))?;
                        ids.get(n).cloned()
                    });
                    match id {
                        Some(id) => Bound::Text(id),
                        None => unreachable!("list SQL names an unknown parameter {other}"),
                    }
                }
            };
            query = match value {
                Bound::Text(text) => query.bind(text),
                Bound::Int(n) => query.bind(n),
            };
        }
        query
    }
}

/// A value bound to a named parameter.
enum Bound {
    Text(String),
    Int(i64),
}

/// ` WHERE a AND b`, or nothing.
fn where_all(conditions: &[&str]) -> String {
    if conditions.is_empty() { String::new() } else { format!(" WHERE {}", conditions.join(" AND ")) }
}

/// The first `shown` rows, and the cursor of the last when more were read.
fn page_of<R>(mut rows: Vec<R>, shown: usize, key: impl Fn(&R) -> Cursor) -> Paged<R> {
    let next = if rows.len() > shown {
        rows.truncate(shown);
        rows.last().map(key)
    } else {
        None
    };
    Paged { rows, next }
}

impl Store {
    /// One page of `SELECT columns FROM from [WHERE filter AND after] ORDER BY order`, and the
    /// cursor of its last row (`key` gives a row's) when more rows follow. A search of a list
    /// with an [`Indexed`] search takes [`super::search`]'s steps.
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
        let mut binds = Binds {
            search,
            phrase: fts_phrase(search.term().unwrap_or_default()),
            now: now.unwrap_or_default(),
            cursor: window.after.clone().unwrap_or_default(),
            limit: window.limit,
            via: Vec::new(),
        };
        let shown = usize::try_from(window.limit).unwrap_or(usize::MAX);
        let (Some(indexed), Some(term)) = (&sql.indexed, search.term()) else {
            let filter = search.pattern().map(|_| sql.filter.to_owned());
            let rows = self.list_rows::<R>(&sql, filter.as_deref(), &window, Step::Scan, &binds).await?;
            return Ok(page_of(rows, shown, key));
        };
        let scanned = indexed.scanned(sql.from);
        // Step 1: a common term fills the page from the first rows in order.
        let rows = self.list_rows::<R>(&sql, Some(&scanned), &window, Step::Probe, &binds).await?;
        if rows.len() > shown {
            return Ok(page_of(rows, shown, key));
        }
        // Step 2: a rarer term, through the indexes, unless too short for trigrams or its
        // users (connections) are too many to name.
        if term.chars().count() >= MIN_INDEXED_CHARS {
            let mut common = false;
            for via in indexed.via {
                let (text, names) = numbered(&via.index.ids(self.backend()));
                let ids: Vec<(String,)> = binds.bind(sqlx::query_as(&text), &names).fetch_all_in(self.read()).await?;
                common |= i64::try_from(ids.len()).unwrap_or(i64::MAX) > MAX_VIA_IDS;
                binds.via.push((*via, ids.into_iter().map(|(id,)| id).collect()));
            }
            if !common {
                let found: Vec<(Via, usize)> = binds.via.iter().map(|(via, ids)| (*via, ids.len())).collect();
                let filter = indexed.indexed(self.backend(), &found);
                let rows = self.list_rows::<R>(&sql, Some(&filter), &window, Step::Index, &binds).await?;
                return Ok(page_of(rows, shown, key));
            }
        }
        // Step 3: read on in order.
        let rows = self.list_rows::<R>(&sql, Some(&scanned), &window, Step::Scan, &binds).await?;
        Ok(page_of(rows, shown, key))
    }

    /// Up to `limit + 1` rows of one step's statement.
    async fn list_rows<R>(
        &self,
        sql: &ListSql<'_>,
        filter: Option<&str>,
        window: &Window,
        step: Step,
        binds: &Binds<'_>,
    ) -> StoreResult<Vec<R>>
    where
        R: for<'r> sqlx::FromRow<'r, AnyRow> + Send + Unpin,
    {
        let ListSql { columns, from, chosen, order, after, .. } = *sql;
        let after = window.after.as_ref().map(|_| after);
        let fence = match self.backend() {
            // `OFFSET 0` keeps PostgreSQL from walking the list's order index to stop early
            // (and, in step 2, makes it combine the indexes' matches, then sort them).
            Backend::Postgres => "OFFSET 0",
            // A subquery with a `LIMIT` is never merged into the outer query by SQLite.
            Backend::Sqlite => "LIMIT -1",
        };
        let text = match (step, chosen) {
            (Step::Scan, Some(Chosen::AnyOf(_) | Chosen::Few(_))) => {
                let conditions: Vec<&str> = filter.into_iter().chain(after).collect();
                let read = ordered_read(from, &conditions, chosen, order, "{limit}", fence);
                format!("SELECT {columns} FROM ({read}) {from} ORDER BY {order} LIMIT {{limit}}")
            }
            (Step::Scan, _) => {
                let chosen = chosen.map(Chosen::condition);
                let conditions: Vec<&str> = filter.into_iter().chain(chosen.as_deref()).chain(after).collect();
                format!("SELECT {columns} FROM {from}{} ORDER BY {order} LIMIT {{limit}}", where_all(&conditions))
            }
            (Step::Probe, _) => format!(
                "SELECT {columns} FROM ({}) {from}{} ORDER BY {order} LIMIT {{limit}}",
                ordered_read(from, &after.into_iter().collect::<Vec<_>>(), chosen, order, "{probe}", fence),
                where_all(&filter.into_iter().collect::<Vec<_>>()),
            ),
            (Step::Index, _) => {
                // The search and the page start inside a fence the planner does not see
                // through; a chosen filter applies outside it, to the rows the search yields.
                // Inside, it would lead the planner to the filter's index, which SQLite then
                // walks whole (every `completed` authorization) looking for FTS5's rowids.
                // PostgreSQL combines the indexes' matches (BitmapOr) and SQLite takes the rowids
                // FTS5 names and the ids' index entries (MULTI-INDEX OR); both then sort them.
                // Walking the list's order index to stop early is right only for a common term,
                // which the probe already took.
                let inner: Vec<&str> = filter.into_iter().chain(after).collect();
                format!(
                    "SELECT {columns} FROM (SELECT * FROM {from}{} {fence}) {from}{} ORDER BY {order} LIMIT {{limit}}",
                    where_all(&inner),
                    where_all(&chosen.map(Chosen::condition).as_deref().into_iter().collect::<Vec<_>>()),
                )
            }
        };
        let (text, names) = numbered(&text);
        Ok(binds.bind(sqlx::query_as::<_, R>(&text), &names).fetch_all_in(self.read()).await?)
    }
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
}
