//! Searching an admin list at a million rows: which rows hold a term, found through an index
//! where one helps, with the same answer as reading the table.
//!
//! A list's searchable text is one SQL expression (its fields joined by spaces, lowercased), a
//! [`TextIndex`]. PostgreSQL indexes that exact expression with a pg_trgm GIN index; SQLite
//! keeps it in an FTS5 table with the trigram tokenizer under the row's rowid (migration 0023,
//! kept by triggers). A row matches when its text contains the term, when the text of a row of
//! another table it names does ([`Via`]: its user's name, its connection's text), or by a
//! condition the list computes from the term ([`Indexed::extra`], an authorization's shown
//! status). Each room declares its own tables' texts; this module knows none of them.
//!
//! A page of matches is found in up to three steps, each exact:
//! 1. **Probe**: the first [`PROBE_ROWS`] rows in the list's order are read and filtered. A
//!    term that many rows hold (a status, an action) fills the page here, from the list's index.
//! 2. **Index**: for a term of [`MIN_INDEXED_CHARS`] characters or more, the rows the text
//!    index names, plus the rows of at most [`MAX_VIA_IDS`] matching users (or connections),
//!    found through their own text index, are sorted. A rare term costs its few matches.
//! 3. **Scan**: a shorter term, or one that more users hold than that, reads the list in order
//!    until a page of matches (as before these indexes; slow only for a short rare term).
//!
//! The term is always bound, never spliced: as a `LIKE` pattern with `%`, `_` and `\` escaped
//! ([`super::paging::Search`]), and for FTS5 as one quoted phrase with `"` doubled, so FTS5 query
//! syntax typed in a search (`OR`, `*`, `NEAR`, `:`) is text to find.

use crate::store::machinery::store::Backend;

/// Rows the probe reads: a term that one row in this many holds fills a 20-row page here.
pub const PROBE_ROWS: i64 = 3000;
/// Shorter terms cannot use a trigram index (PostgreSQL would read all of it; FTS5 finds nothing).
pub const MIN_INDEXED_CHARS: usize = 3;
/// At most this many users (or connections) matched through their name are looked up by id;
/// with more, the term is common and the scan finds a page quickly.
pub const MAX_VIA_IDS: i64 = 100;

/// One table's searchable text and where it is indexed.
#[derive(Debug, Clone, Copy)]
pub struct TextIndex {
    pub table: &'static str,
    /// `LOWER(…)` over the table's own columns, exactly as PostgreSQL's index spells it.
    pub text: &'static str,
    /// SQLite: the FTS5 table holding the text under the row's rowid, and its column.
    pub fts: &'static str,
    pub column: &'static str,
    /// The rows the index holds, when it holds only some (a partial index: PostgreSQL uses it
    /// only for a question that names its condition); the others are found another way.
    pub partial: Option<&'static str>,
}

/// Another table whose matching rows make a row match, through a column of the row that names
/// theirs (a user's name, a connection's text): declared by the room that owns that table.
#[derive(Debug, Clone, Copy)]
pub struct Via {
    /// The other table's searchable text.
    pub index: TextIndex,
    /// The column of the listed row that holds the other row's `id`.
    pub column: &'static str,
    /// The parameter-name prefix of its ids (`{u0}`, `{u1}`, …); distinct within one list.
    pub prefix: char,
}

/// How one list is searched.
#[derive(Debug, Clone)]
pub struct Indexed {
    pub own: TextIndex,
    pub via: &'static [Via],
    /// Conditions the list derived from the term (fixed SQL, may use `{now}`), any of which
    /// makes a row match.
    pub extra: Vec<&'static str>,
}

impl TextIndex {
    /// Rows of this table whose text holds the term, read row by row.
    pub fn scanned(&self) -> String {
        format!("{} LIKE {{q}} ESCAPE '\\'", self.text)
    }

    /// The same rows, found through the text index (only those it holds, see `partial`).
    pub fn indexed(&self, backend: Backend) -> String {
        match (backend, self.partial) {
            // The index is on this very expression (migration 0023); the planner uses it.
            (Backend::Postgres, None) => self.scanned(),
            (Backend::Postgres, Some(only)) => format!("({only} AND {})", self.scanned()),
            // FTS5 names candidate rowids (it folds more case than `LOWER`), and the `LIKE`
            // keeps exactly what the scan would.
            (Backend::Sqlite, _) => format!(
                "(rowid IN (SELECT rowid FROM {fts} WHERE {fts} MATCH '{column} : ' || {{m}}) AND {scanned})",
                fts = self.fts,
                column = self.column,
                scanned = self.scanned()
            ),
        }
    }

    /// Up to `{cap}` ids (`id`) of this table's rows whose text holds the term, by the index.
    pub fn ids(&self, backend: Backend) -> String {
        format!("SELECT id FROM {} WHERE {} LIMIT {{cap}}", self.table, self.indexed(backend))
    }
}

impl Indexed {
    /// The whole match as a row-by-row condition on `table`'s rows (the probe and the scan).
    pub fn scanned(&self, table: &str) -> String {
        let mut any = vec![self.own.scanned()];
        for via in self.via {
            let other = via.index;
            any.push(format!(
                "EXISTS (SELECT 1 FROM {t} WHERE {t}.id = {table}.{column} AND {text})",
                t = other.table,
                column = via.column,
                text = other.scanned()
            ));
        }
        any.extend(self.extra.iter().map(|e| (*e).to_owned()));
        format!("({})", any.join(" OR "))
    }

    /// The whole match through indexes, given how many ids each [`Via`] found (bound as
    /// `{u0}`…, `{g0}`…).
    pub fn indexed(&self, backend: Backend, found: &[(Via, usize)]) -> String {
        let mut any = vec![self.own.indexed(backend)];
        for (via, n) in found {
            if *n > 0 {
                let names: Vec<String> = (0..*n).map(|i| format!("{{{}{i}}}", via.prefix)).collect();
                any.push(format!("{} IN ({})", via.column, names.join(", ")));
            }
        }
        any.extend(self.extra.iter().map(|e| (*e).to_owned()));
        format!("({})", any.join(" OR "))
    }
}

/// The term as one FTS5 phrase: quoted, with `"` doubled, so nothing in it is query syntax.
pub fn fts_phrase(term: &str) -> String {
    format!("\"{}\"", term.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_term_is_one_quoted_fts_phrase_whatever_it_holds() {
        assert_eq!(fts_phrase("alice"), "\"alice\"");
        assert_eq!(fts_phrase("a\" OR \"b"), "\"a\"\" OR \"\"b\"");
        assert_eq!(fts_phrase("x* NEAR(y) col:z"), "\"x* NEAR(y) col:z\"");
    }

    const GRANT_TEXT: TextIndex = TextIndex {
        table: "grants",
        text: "LOWER(provider || ' ' || id)",
        fts: "grants_search",
        column: "text",
        partial: None,
    };
    const USER_NAMES: TextIndex =
        TextIndex { table: "users", text: "LOWER(subject)", fts: "users_search", column: "name", partial: None };
    const BY_USER: Via = Via { index: USER_NAMES, column: "user_id", prefix: 'u' };

    #[test]
    fn the_scan_and_the_index_ask_the_same_question() {
        let list = Indexed { own: GRANT_TEXT, via: &[BY_USER], extra: vec!["status = 'x'"] };
        let scanned = list.scanned("grants");
        assert!(scanned.contains("EXISTS (SELECT 1 FROM users WHERE users.id = grants.user_id"), "{scanned}");
        let indexed = list.indexed(Backend::Sqlite, &[(BY_USER, 2)]);
        assert!(indexed.contains("MATCH 'text : ' || {m}") && indexed.contains("user_id IN ({u0}, {u1})"), "{indexed}");
        assert!(indexed.ends_with(" OR status = 'x')"), "{indexed}");
        assert_eq!(
            list.indexed(Backend::Postgres, &[(BY_USER, 0)]),
            format!("({} OR status = 'x')", GRANT_TEXT.scanned())
        );
    }
}
