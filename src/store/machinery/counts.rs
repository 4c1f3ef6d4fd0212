//! The dashboard's counts, each costing about the same with a thousand rows as with a million:
//! exact up to [`COUNT_CAP`]; past that a whole table is estimated by the database
//! ([`Count::About`]) and a filtered count says [`Count::AtLeast`]. A room counts its own rows
//! with [`Store::capped_count`], naming its table and an indexed filter.

use crate::store::machinery::cache_effect::FetchIn;
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::placeholders::numbered;
use crate::store::machinery::store::{Backend, Store};

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
    /// `SELECT COUNT(*) FROM table [WHERE filter]`, reading at most [`COUNT_CAP`] + 1 rows;
    /// past the cap a whole table is estimated, a filtered count is a lower bound.
    pub(crate) async fn capped_count(&self, table: &str, filter: Option<&str>, now: i64) -> StoreResult<Count> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_exact_estimated_or_at_least() {
        assert_eq!(Count::Exact(12).shown(), "12");
        assert_eq!(Count::About(1_234_567).shown(), "about 1,234,567");
        assert_eq!(Count::AtLeast(10_000).shown(), "more than 10,000");
    }
}
