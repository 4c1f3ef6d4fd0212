//! Every database call answers within a bound, even when the database does not.
//!
//! Three layers, because each catches what the others cannot:
//! - the pool's acquire timeout bounds waiting for a connection (all busy or stuck, or a new
//!   one that cannot connect);
//! - PostgreSQL's `statement_timeout` and `lock_timeout` (set per connection in
//!   [`super::store::Store::connect_with`]) end a slow query or a wait on a row lock on the server,
//!   which leaves the connection usable;
//! - `Timed`, the executor under every store handle ([`super::cache_effect`]), puts a
//!   client-side deadline around the whole call (acquire and query): a connection whose socket
//!   went silent — no reset, no answer — never reaches the server's timers, and only the client
//!   can give up on it.
//!
//! A call that gives up reports [`sqlx::Error::Io`] with `TimedOut`, which the store turns into
//! [`super::error::StoreError::Unavailable`]: the caller may retry.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{BoxStream, Stream, StreamExt};
use sqlx::Describe;
use sqlx::any::{Any, AnyQueryResult, AnyRow, AnyStatement, AnyTypeInfo};
use sqlx::{AnyPool, Either, Execute, Executor};

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

/// The pool with a deadline on every call. `Copy`, like `&AnyPool`. It knows nothing of
/// caches: the store reaches it only through the handles of [`super::cache_effect`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Timed<'p> {
    pub(super) pool: &'p AnyPool,
    pub(super) limit: Duration,
}

impl Timed<'_> {
    /// `work` (one call: acquire, query, rows) within the deadline.
    pub(super) async fn bounded<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, sqlx::Error> {
        tokio::time::timeout(self.limit, work).await.unwrap_or_else(|_| Err(timed_out(self.limit)))
    }
}

impl<'p> Executor<'p> for Timed<'p> {
    type Database = Any;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Any>,
    {
        Deadline::new(self.pool.fetch_many(query), self.limit).boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Any>,
    {
        let limit = self.limit;
        let call = self.pool.fetch_optional(query);
        Box::pin(async move { tokio::time::timeout(limit, call).await.unwrap_or_else(|_| Err(timed_out(limit))) })
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
