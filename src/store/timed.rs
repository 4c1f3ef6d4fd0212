//! Every database call answers within a bound, even when the database does not.
//!
//! Three layers, because each catches what the others cannot:
//! - the pool's acquire timeout bounds waiting for a connection (all busy or stuck, or a new
//!   one that cannot connect);
//! - PostgreSQL's `statement_timeout` and `lock_timeout` (set per connection in
//!   [`super::Store::connect_with`]) end a slow query or a wait on a row lock on the server,
//!   which leaves the connection usable;
//! - [`Db`], the executor every store query runs on, puts a client-side deadline around the
//!   whole call (acquire and query): a connection whose socket went silent — no reset, no
//!   answer — never reaches the server's timers, and only the client can give up on it.
//!
//! A call that gives up reports [`sqlx::Error::Io`] with `TimedOut`, which the store turns into
//! [`super::StoreError::Unavailable`]: the caller may retry.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{BoxStream, Stream, StreamExt};
use sqlx::Describe;
use sqlx::any::{Any, AnyQueryResult, AnyRow, AnyStatement, AnyTypeInfo};
use sqlx::{AnyPool, Either, Execute, Executor};

use super::freshness::Freshness;

/// How long one database call may take, from asking for a connection to the last row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatabaseTimeouts {
    pub query: Duration,
}

impl Default for DatabaseTimeouts {
    fn default() -> Self {
        Self { query: Duration::from_secs(5) }
    }
}

impl DatabaseTimeouts {
    /// The server-side timers fire a little before the client gives up, so an ordinary slow
    /// query is cancelled by the server (the connection stays usable) and the client's deadline
    /// only ends calls whose connection went silent.
    pub(crate) fn server_side(&self) -> Duration {
        self.query.mul_f64(0.8).max(Duration::from_millis(100))
    }
}

/// The error a call that ran out of time reports.
pub(crate) fn timed_out(limit: Duration) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("the database did not answer within {}", humantime::format_duration(limit)),
    ))
}

/// The pool with a deadline on every call. `Copy`, like `&AnyPool`.
///
/// A call that may write (anything but a `SELECT`) moves the cache generation when it has
/// finished ([`super::freshness`]), so nothing cached before it is used after it: only `user`'s
/// when the caller said the statement changes only that user's rows, else everyone's.
#[derive(Debug, Clone, Copy)]
pub struct Db<'p> {
    pub(crate) pool: &'p AnyPool,
    pub(crate) limit: Duration,
    pub(crate) freshness: &'p Freshness,
    pub(crate) user: Option<&'p str>,
}

impl<'p> Db<'p> {
    /// What to move after `sql`, if anything.
    fn moves_after(&self, sql: &str) -> WrittenOnDrop<'p> {
        WrittenOnDrop(may_change_cached(sql).then_some((self.freshness, self.user)))
    }
}

/// Whether a statement only reads. Anything not starting with `SELECT` counts as a write
/// (`INSERT … RETURNING`, `UPDATE`, `DELETE`, `WITH …`): erring this way costs a cache refill,
/// never a stale answer.
fn reads_only(sql: &str) -> bool {
    sql.trim_start().get(..6).is_some_and(|word| word.eq_ignore_ascii_case("select"))
}

/// Tables no cache rests on ([`super::freshness`] lists what the caches read: users, the
/// authorization server's grants, grants and client consents). A write to one of these leaves
/// the caches alone, so sign-ins, audit entries, throttles, the demo provider's tokens and
/// signals do not empty them; a write whose table is not recognised here moves the generation.
const NOT_CACHED: &[&str] = &[
    "audit_log",
    "authorizations",
    "browser_sessions",
    "demo_codes",
    "demo_tokens",
    "oauth_codes",
    "signal_outbox",
    "throttle_failures",
    "throttle_known_addresses",
    "throttle_locks",
];

/// Whether a statement may change what a cache holds: anything but a read or a write to a
/// table in [`NOT_CACHED`].
fn may_change_cached(sql: &str) -> bool {
    if reads_only(sql) {
        return false;
    }
    let mut words = sql.split_whitespace();
    let first = words.next().unwrap_or_default();
    let target = if first.eq_ignore_ascii_case("update") {
        words.next()
    } else if first.eq_ignore_ascii_case("insert") || first.eq_ignore_ascii_case("delete") {
        // `INSERT INTO t`, `DELETE FROM t`; nothing else (`INSERT OR …`) is recognised.
        words
            .next()
            .filter(|w| w.eq_ignore_ascii_case("into") || w.eq_ignore_ascii_case("from"))
            .and_then(|_| words.next())
    } else {
        None
    };
    !target.is_some_and(|table| NOT_CACHED.iter().any(|t| t.eq_ignore_ascii_case(table)))
}

/// Moves the generation (the user's, or everyone's) when dropped: after the last row of a write
/// was read, or when the call was given up on (the write may still land).
struct WrittenOnDrop<'p>(Option<(&'p Freshness, Option<&'p str>)>);

impl Drop for WrittenOnDrop<'_> {
    fn drop(&mut self) {
        match self.0 {
            Some((freshness, Some(user))) => freshness.written_for(user),
            Some((freshness, None)) => freshness.written(),
            None => {}
        }
    }
}

impl<'p> Executor<'p> for Db<'p> {
    type Database = Any;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Any>,
    {
        let written = self.moves_after(query.sql());
        Deadline::new(self.pool.fetch_many(query), self.limit)
            .map(move |item| {
                let _ = &written;
                item
            })
            .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Any>,
    {
        let limit = self.limit;
        let written = self.moves_after(query.sql());
        let call = self.pool.fetch_optional(query);
        Box::pin(async move {
            let answer = tokio::time::timeout(limit, call).await.unwrap_or_else(|_| Err(timed_out(limit)));
            drop(written);
            answer
        })
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [AnyTypeInfo],
    ) -> BoxFuture<'e, Result<AnyStatement<'q>, sqlx::Error>>
    where
        'p: 'e,
    {
        let limit = self.limit;
        let call = self.pool.prepare_with(sql, parameters);
        Box::pin(async move { tokio::time::timeout(limit, call).await.unwrap_or_else(|_| Err(timed_out(limit))) })
    }

    fn describe<'e, 'q: 'e>(self, sql: &'q str) -> BoxFuture<'e, Result<Describe<Any>, sqlx::Error>>
    where
        'p: 'e,
    {
        let limit = self.limit;
        let call = self.pool.describe(sql);
        Box::pin(async move { tokio::time::timeout(limit, call).await.unwrap_or_else(|_| Err(timed_out(limit))) })
    }
}

/// A stream that ends with [`timed_out`] once its deadline passes (the inner stream, and with
/// it the connection's part in the call, is dropped).
struct Deadline<'e, T> {
    inner: Option<BoxStream<'e, Result<T, sqlx::Error>>>,
    sleep: Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
}

impl<'e, T> Deadline<'e, T> {
    fn new(inner: BoxStream<'e, Result<T, sqlx::Error>>, limit: Duration) -> Self {
        Self { inner: Some(inner), sleep: Box::pin(tokio::time::sleep(limit)), limit }
    }
}

impl<T> Stream for Deadline<'_, T> {
    type Item = Result<T, sqlx::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Some(inner) = self.inner.as_mut() else { return Poll::Ready(None) };
        if let Poll::Ready(item) = inner.poll_next_unpin(cx) {
            return Poll::Ready(item);
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            self.inner = None;
            return Poll::Ready(Some(Err(timed_out(self.limit))));
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_select_counts_as_a_read() {
        assert!(reads_only("SELECT n FROM auth_epoch"));
        assert!(reads_only("  select 1"));
        for write in [
            "UPDATE grants SET x = 1",
            "INSERT INTO t VALUES (1) RETURNING id",
            "DELETE FROM t",
            "WITH x AS (DELETE FROM t) SELECT 1",
            "SEL",
            "",
        ] {
            assert!(!reads_only(write), "{write}");
        }
    }

    #[test]
    fn only_writes_to_tables_a_cache_reads_move_the_generation() {
        for moves in [
            "UPDATE grants SET x = 1",
            "DELETE FROM client_consents WHERE a = 1",
            "INSERT INTO users (id) VALUES ($1)",
            "UPDATE oauth_grants SET revoked_at = $1",
            "INSERT OR REPLACE INTO audit_log VALUES (1)",
            "WITH x AS (DELETE FROM audit_log) SELECT 1",
            "UPDATE audit_logs SET x = 1",
            "DELETE audit_log",
        ] {
            assert!(may_change_cached(moves), "{moves}");
        }
        for stays in [
            "SELECT * FROM grants",
            "INSERT INTO audit_log (at) VALUES ($1)",
            "update browser_sessions set x = 1",
            "DELETE FROM throttle_failures WHERE bucket = $1",
            "INSERT INTO demo_tokens (token_hash) VALUES ($1)",
        ] {
            assert!(!may_change_cached(stays), "{stays}");
        }
    }

    #[tokio::test]
    async fn a_stream_that_never_answers_ends_with_a_timeout() {
        let silent: BoxStream<'static, Result<u8, sqlx::Error>> = futures::stream::pending().boxed();
        let mut timed = Deadline::new(silent, Duration::from_millis(20));
        match timed.next().await {
            Some(Err(sqlx::Error::Io(e))) => assert_eq!(e.kind(), std::io::ErrorKind::TimedOut),
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert!(timed.next().await.is_none(), "nothing after the timeout");
    }

    #[tokio::test]
    async fn a_stream_that_answers_in_time_is_passed_through() {
        let rows: BoxStream<'static, Result<u8, sqlx::Error>> = futures::stream::iter([Ok(1), Ok(2)]).boxed();
        let collected: Vec<u8> =
            Deadline::new(rows, Duration::from_secs(5)).map(|r| r.unwrap()).collect::<Vec<_>>().await;
        assert_eq!(collected, vec![1, 2]);
    }
}
