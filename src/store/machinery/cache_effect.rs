//! Every statement the store runs says, in the type of the call, what it does to the caches of
//! database reads ([`super::generations`]).
//!
//! - A read goes through [`Reads`] (`Store::read`), which only fetches:
//!   `query.bind(x).fetch_optional_in(self.read())` ([`FetchIn`]).
//! - A write goes through a handle obtained by naming its [`CacheEffect`]: [`Writes`]
//!   (`self.write(CacheEffect::User(&user_id))`, `CacheEffect::Everyone`, `CacheEffect::Nothing`)
//!   for a single statement, [`Transaction`](super::transaction::Transaction)
//!   (`self.begin(effect)`) for several, or [`WriteReturningUser`] for a statement about one user's
//!   row that returns the row's `user_id` — the grant writes that know a grant by id alone name its
//!   owner that way, with no look-up before.
//!
//! The generation moves when the write is done: after its last row was read, after its
//! transaction committed, or when the call was given up on (its future dropped, a deadline
//! passed, an error): the write may still land. A single statement that finished and changed no
//! row moves nothing (the store runs no data-modifying `WITH`, whose count would be the outer
//! `SELECT`'s), nor does a transaction that was rolled back or never committed.
//!
//! Only [`Writes`] and [`Transaction`](super::transaction::Transaction) run statements the way sqlx
//! writes (`execute`, or any `Executor`), and [`WriteReturningUser`] fetches only rows that name
//! their user, so a write that forgets to declare its effect does not compile:
//!
//! ```compile_fail,E0277
//! async fn undeclared(reads: oauth_broker::store::Reads<'_>) -> Result<(), sqlx::Error> {
//!     sqlx::query("DELETE FROM grants WHERE id = $1").bind("g").execute(reads).await?;
//!     Ok(())
//! }
//! ```
//!
//! while the same statement through a handle that names its effect does:
//!
//! ```no_run
//! async fn declared(writes: oauth_broker::store::Writes<'_>) -> Result<(), sqlx::Error> {
//!     sqlx::query("DELETE FROM grants WHERE id = $1").bind("g").execute(writes).await?;
//!     Ok(())
//! }
//! ```
//!
//! What the types cannot stop is a statement that writes and returns rows (`INSERT …
//! RETURNING`) fetched through [`Reads`], or a write declared [`CacheEffect::Nothing`] that
//! changes what a cache reads. Guarding them reads no SQL text:
//! - the handles are handed out only inside `src/store/` (`Store::read` and the others are
//!   private to it), so every statement the broker runs is one of the store's own functions,
//!   each a few lines beside its SQL, and a function that writes names its effect where a
//!   reviewer sees it;
//! - debug builds check both on SQLite, on the connection the statement ran on
//!   (`src/store/machinery/declared.rs`): a read must change no row (`total_changes()`), a
//!   write declared `Nothing` no row of the tables whose triggers move `auth_epoch`. Every test
//!   runs a debug build on SQLite, so every path the tests take is checked; release builds read
//!   nothing more;
//! - the caches' end-to-end tests (`tests/api/operating/caches.rs`) change every kind of row the
//!   caches rest on through the store's functions, on both backends, and check the very next
//!   request sees it.
//!
//! ([`Store::pool`] remains for migrations, backups and tests that poke rows: it declares
//! nothing.)

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::stream::{BoxStream, Stream, StreamExt};
use sqlx::any::{Any, AnyQueryResult, AnyRow, AnyStatement, AnyTypeInfo};
use sqlx::query::QueryAs;
use sqlx::{Describe, Either, Execute, Executor, FromRow, IntoArguments};

use crate::store::machinery::deadlines::Timed;
use crate::store::machinery::declared;
use crate::store::machinery::generations::Generations;
use crate::store::machinery::store::Store;

/// What a write may change of what the caches hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheEffect<'a> {
    /// Rows of this user only (their `users` row, grants, consents, approvals of clients):
    /// only what was read for them is dropped; everyone else's caches stay warm.
    User(&'a str),
    /// Rows a cache rests on, of several users or of none in particular (a removed client's
    /// consents, a revoked demo token): everything cached is dropped.
    Everyone,
    /// No row any cache reads (audit entries, sessions, throttles, authorizations, codes, …):
    /// see [`super::generations`] for the tables the caches rest on.
    Nothing,
}

impl CacheEffect<'_> {
    fn apply(self, generations: &Generations) {
        match self {
            CacheEffect::User(user_id) => generations.move_user(user_id),
            CacheEffect::Everyone => generations.move_everyone(),
            CacheEffect::Nothing => {}
        }
    }
}

impl Store {
    fn timed(&self) -> Timed<'_> {
        // Tests count what one request costs.
        self.queries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Timed { pool: &self.pool, limit: self.timeouts.query }
    }

    /// The handle for one statement that only reads.
    pub(in crate::store) fn read(&self) -> Reads<'_> {
        Reads { timed: self.timed() }
    }

    /// The handle for one statement that writes, with what it does to the caches.
    pub(in crate::store) fn write<'a>(&'a self, effect: CacheEffect<'a>) -> Writes<'a> {
        Writes { timed: self.timed(), generations: &self.generations, effect }
    }

    /// The handle for one statement about one user's row that returns the row's `user_id`:
    /// that user's generation moves.
    pub(in crate::store) fn write_returning_user(&self) -> WriteReturningUser<'_> {
        WriteReturningUser { timed: self.timed(), generations: &self.generations }
    }
}

/// One statement that only reads: it fetches ([`FetchIn`]) and implements no `Executor` (see
/// the module).
#[derive(Debug, Clone, Copy)]
pub struct Reads<'p> {
    timed: Timed<'p>,
}

/// A read keeps sqlx's chain, on the read handle: `query.bind(x).fetch_optional_in(self.read())`.
pub trait FetchIn<O>: Sized {
    fn fetch_one_in(self, reads: Reads<'_>) -> impl Future<Output = Result<O, sqlx::Error>> + Send;
    fn fetch_optional_in(self, reads: Reads<'_>) -> impl Future<Output = Result<Option<O>, sqlx::Error>> + Send;
    fn fetch_all_in(self, reads: Reads<'_>) -> impl Future<Output = Result<Vec<O>, sqlx::Error>> + Send;
}

impl<'q, O, A> FetchIn<O> for QueryAs<'q, Any, O, A>
where
    A: 'q + IntoArguments<'q, Any>,
    O: Send + Unpin + for<'r> FromRow<'r, AnyRow>,
{
    async fn fetch_one_in(self, reads: Reads<'_>) -> Result<O, sqlx::Error> {
        self.fetch_optional_in(reads).await?.ok_or(sqlx::Error::RowNotFound)
    }

    /// On one connection, asked before and after whether the statement changed a row (debug
    /// builds, `src/store/machinery/declared.rs`).
    async fn fetch_optional_in(self, reads: Reads<'_>) -> Result<Option<O>, sqlx::Error> {
        let sql = self.sql();
        reads
            .timed
            .bounded(async move {
                let mut conn = reads.timed.pool.acquire().await?;
                let before = declared::before_read(&mut conn).await;
                let row = self.fetch_optional(&mut *conn).await;
                declared::after(&mut conn, before, sql).await;
                row
            })
            .await
    }

    /// As [`FetchIn::fetch_optional_in`].
    async fn fetch_all_in(self, reads: Reads<'_>) -> Result<Vec<O>, sqlx::Error> {
        let sql = self.sql();
        reads
            .timed
            .bounded(async move {
                let mut conn = reads.timed.pool.acquire().await?;
                let before = declared::before_read(&mut conn).await;
                let rows = self.fetch_all(&mut *conn).await;
                declared::after(&mut conn, before, sql).await;
                rows
            })
            .await
    }
}

/// One statement that writes, and what it does to the caches: an `Executor`, so every sqlx
/// call (`execute`, `fetch_*`) runs on it.
#[derive(Debug, Clone, Copy)]
pub struct Writes<'p> {
    timed: Timed<'p>,
    generations: &'p Generations,
    effect: CacheEffect<'p>,
}

impl Writes<'_> {
    /// Runs `query` to its end on one connection: its total result and its first row. A write
    /// declared to change nothing cached is checked to (debug builds, [`super::declared`]).
    async fn run<'q, E>(self, query: E) -> Result<(AnyQueryResult, Option<AnyRow>), sqlx::Error>
    where
        E: 'q + Execute<'q, Any>,
    {
        let Writes { timed, generations, effect } = self;
        let sql = query.sql();
        timed
            .bounded(async move {
                let mut conn = timed.pool.acquire().await?;
                let before = declared::before_write(&mut conn, matches!(effect, CacheEffect::Nothing)).await;
                let mut landing = Landing::new(generations, effect);
                let (mut done, mut first) = (AnyQueryResult::default(), None);
                let mut steps = (&mut *conn).fetch_many(query);
                loop {
                    let step = steps.next().await;
                    landing.saw(&step);
                    match step {
                        None => break,
                        Some(Err(error)) => return Err(error),
                        Some(Ok(Either::Left(result))) => done.extend([result]),
                        Some(Ok(Either::Right(row))) => {
                            first.get_or_insert(row);
                        }
                    }
                }
                drop(steps);
                declared::after(&mut conn, before, sql).await;
                Ok((done, first))
            })
            .await
    }
}

impl<'p> Executor<'p> for Writes<'p> {
    type Database = Any;

    fn execute<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, Result<AnyQueryResult, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Any>,
    {
        Box::pin(async move { self.run(query).await.map(|(done, _)| done) })
    }

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Any>,
    {
        let landing = Landing::new(self.generations, self.effect);
        Watched { inner: self.timed.fetch_many(query), landing }.boxed()
    }

    /// Reads the statement to its end, not only to its first row: the write is then done (a
    /// PostgreSQL statement commits after its rows were sent), so the generation moves after
    /// it, never before.
    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Any>,
    {
        Box::pin(async move { self.run(query).await.map(|(_, first)| first) })
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [AnyTypeInfo],
    ) -> BoxFuture<'e, Result<AnyStatement<'q>, sqlx::Error>>
    where
        'p: 'e,
    {
        self.timed.prepare_with(sql, parameters)
    }

    fn describe<'e, 'q: 'e>(self, sql: &'q str) -> BoxFuture<'e, Result<Describe<Any>, sqlx::Error>>
    where
        'p: 'e,
    {
        self.timed.describe(sql)
    }
}

/// A row a write returns that names the user whose row it is.
pub trait NamesUser {
    fn user_id(&self) -> &str;
}

/// `RETURNING user_id`.
#[derive(Debug, sqlx::FromRow)]
pub struct ReturnedUser {
    pub user_id: String,
}

impl NamesUser for ReturnedUser {
    fn user_id(&self) -> &str {
        &self.user_id
    }
}

/// One statement about one user's row that returns it (at least its `user_id`): the user whose
/// generation moves is the one the row names. Everyone's moves when the call ends without an
/// answer (the write may have landed), nothing when no row matched.
#[derive(Debug, Clone, Copy)]
pub struct WriteReturningUser<'p> {
    timed: Timed<'p>,
    generations: &'p Generations,
}

impl WriteReturningUser<'_> {
    /// The row the statement changed, if any.
    pub async fn fetch_optional<'q, O, A>(self, query: QueryAs<'q, Any, O, A>) -> Result<Option<O>, sqlx::Error>
    where
        A: 'q + IntoArguments<'q, Any>,
        O: Send + Unpin + for<'r> FromRow<'r, AnyRow> + NamesUser,
    {
        let mut landing = Landing::new(self.generations, CacheEffect::Everyone);
        // To the end, as `Writes::fetch_optional`.
        let rows = query.fetch_all(self.timed).await?;
        landing.settled();
        let mut rows = rows.into_iter();
        let first = rows.next();
        match &first {
            None => {}
            Some(row) if rows.all(|other| other.user_id() == row.user_id()) => {
                self.generations.move_user(row.user_id())
            }
            Some(_) => self.generations.move_everyone(),
        }
        Ok(first)
    }
}

/// A write on its way: applies its effect when dropped, unless it is known to have changed
/// nothing ([`Landing::settled`] after the answer said so).
pub(super) struct Landing<'p> {
    generations: &'p Generations,
    effect: CacheEffect<'p>,
    /// The statement ran to its end and reported no row changed so far.
    unchanged: bool,
    finished: bool,
}

impl<'p> Landing<'p> {
    pub(super) fn new(generations: &'p Generations, effect: CacheEffect<'p>) -> Self {
        Self { generations, effect, unchanged: true, finished: false }
    }

    /// The effect is the caller's to apply now (or not): nothing happens on drop.
    fn settled(&mut self) {
        self.effect = CacheEffect::Nothing;
    }

    fn saw(&mut self, step: &Option<Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>) {
        match step {
            None => self.finished = true,
            Some(Ok(Either::Left(done))) if done.rows_affected() == 0 => {}
            Some(_) => self.unchanged = false,
        }
    }
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        if !(self.finished && self.unchanged) {
            self.effect.apply(self.generations);
        }
    }
}

/// A write's stream of results, watched to its end by its [`Landing`].
struct Watched<'e> {
    inner: BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>,
    landing: Landing<'e>,
}

impl Stream for Watched<'_> {
    type Item = Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let step = futures::ready!(self.inner.poll_next_unpin(cx));
        self.landing.saw(&step);
        Poll::Ready(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Scopes;
    use crate::store::grants::{Grants, Lease, NewGrant, SealedTokens};

    async fn store_with_grant() -> (tempfile::TempDir, Store, String, String) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}/t.db?mode=rwc", dir.path().display())).await.unwrap();
        store.migrate().await.unwrap();
        let user = store.users().create_local("http://issuer", "alice", "hash", 1).await.unwrap().id;
        let tokens = SealedTokens {
            access_token_sealed: vec![1],
            refresh_token_sealed: Some(vec![2]),
            key_id: "k1".into(),
            expires_at: None,
            scopes: Scopes::default(),
        };
        let grant = Grants::id_for(&user, "demo", "");
        assert!(
            store
                .grants()
                .upsert(
                    &NewGrant {
                        id: &grant,
                        user_id: &user,
                        provider: "demo",
                        account_label: None,
                        tokens: &tokens,
                        organization: &crate::domain::OrganizationId::default_organization(),
                        app_id: None
                    },
                    10
                )
                .await
                .unwrap()
        );
        (dir, store, user, grant)
    }

    /// (everyone's step, alice's, bob's), to compare before and after.
    fn steps(store: &Store, alice: &str) -> (u64, u64, u64) {
        let (everyone, alices) = store.generations.steps(alice);
        (everyone, alices, store.generations.steps("bob").1)
    }

    #[tokio::test]
    async fn each_declared_effect_moves_what_it_names_once_the_write_is_done() {
        let (_dir, store, alice, _) = store_with_grant().await;
        let sql = "UPDATE users SET display_name = 'x' WHERE id = $1";

        let before = steps(&store, &alice);
        sqlx::query(sql).bind(&alice).execute(store.write(CacheEffect::User(&alice))).await.unwrap();
        let after = steps(&store, &alice);
        assert!(after.1 > before.1, "alice's moved");
        assert_eq!((after.0, after.2), (before.0, before.2), "nobody else's");

        sqlx::query("INSERT INTO audit_log (at, action) VALUES (1, 'test')")
            .execute(store.write(CacheEffect::Nothing))
            .await
            .unwrap();
        assert_eq!(steps(&store, &alice), after, "nothing moved");

        sqlx::query(sql).bind(&alice).execute(store.write(CacheEffect::Everyone)).await.unwrap();
        assert!(steps(&store, &alice).0 > after.1, "everyone's moved past alice's own");

        let before = steps(&store, &alice);
        let _: Option<(String,)> = sqlx::query_as("SELECT id FROM users WHERE id = $1")
            .bind(&alice)
            .fetch_optional_in(store.read())
            .await
            .unwrap();
        assert_eq!(steps(&store, &alice), before, "a read moves nothing");
    }

    #[tokio::test]
    async fn a_statement_that_changed_no_row_moves_nothing_and_one_that_failed_moves_its_effect() {
        let (_dir, store, alice, _) = store_with_grant().await;
        let before = steps(&store, &alice);
        let done = sqlx::query("UPDATE users SET display_name = 'x' WHERE id = 'nobody'")
            .execute(store.write(CacheEffect::Everyone))
            .await
            .unwrap();
        assert_eq!(done.rows_affected(), 0);
        assert_eq!(steps(&store, &alice), before);

        let failed = sqlx::query("UPDATE no_such_table SET x = 1").execute(store.write(CacheEffect::Everyone)).await;
        assert!(failed.is_err());
        assert!(steps(&store, &alice).0 > before.0, "an error may come after the write landed");
    }

    #[tokio::test]
    async fn a_write_by_grant_id_moves_the_user_its_row_names() {
        let (_dir, store, alice, grant) = store_with_grant().await;
        let before = steps(&store, &alice);
        assert!(store.grants().relabel(&grant, Some("work")).await.unwrap());
        let after = steps(&store, &alice);
        assert!(after.1 > before.1, "alice's moved");
        assert_eq!((after.0, after.2), (before.0, before.2), "nobody else's");

        assert!(!store.grants().relabel("no such grant", Some("x")).await.unwrap());
        assert_eq!(steps(&store, &alice), after, "no row, no move");
        let version = store.grants().by_id(&grant).await.unwrap().unwrap().version;
        assert!(
            !store
                .grants()
                .claim_lease(&Lease { grant_id: &grant, version: version + 7, holder: "h" }, 20, 30, 5)
                .await
                .unwrap()
        );
        assert_eq!(steps(&store, &alice), after, "a claim that lost moves nothing");
    }

    #[tokio::test]
    async fn a_transaction_moves_its_effect_when_it_commits_and_nothing_when_it_does_not() {
        let (_dir, store, alice, _) = store_with_grant().await;
        let sql = "UPDATE users SET display_name = 'x' WHERE id = $1";
        let before = steps(&store, &alice);

        let mut tx = store.begin(CacheEffect::User(&alice)).await.unwrap();
        sqlx::query(sql).bind(&alice).execute(&mut *tx).await.unwrap();
        tx.rollback().await.unwrap();
        let mut tx = store.begin(CacheEffect::User(&alice)).await.unwrap();
        sqlx::query(sql).bind(&alice).execute(&mut *tx).await.unwrap();
        drop(tx);
        assert_eq!(steps(&store, &alice), before, "rolled back, or dropped uncommitted: nothing landed");

        let mut tx = store.begin(CacheEffect::User(&alice)).await.unwrap();
        sqlx::query(sql).bind(&alice).execute(&mut *tx).await.unwrap();
        assert_eq!(steps(&store, &alice), before, "not before the commit");
        tx.commit().await.unwrap();
        assert!(steps(&store, &alice).1 > before.1);
    }
}
