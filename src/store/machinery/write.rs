//! Writes as values, and the one way to write one with a note beside it.
//!
//! A write that may be noted (a grant stored, refreshed, marked or deleted; an authorization
//! declined or completed) is a value implementing [`Write`]: its statements, their binds and
//! what each does to the caches of reads, in one place, run wherever [`On`] says:
//! - **alone** (`.await` on its [`Written`]): through the store's handles, each statement
//!   bounded and declaring its own effect ([`super::cache_effect`]); a write of several
//!   statements in one transaction of its own;
//! - **beside a note** ([`Written::noting`], a webhook event): when someone listens
//!   ([`Note::wanted`]), in one transaction with the note, which is written only if the write
//!   applied, so a change is never committed without its note nor a note without its change;
//!   when nobody listens, alone, at no extra cost;
//! - **within another write's transaction** ([`Written::within`]): an authorization that
//!   completes records the consent it carries with the consents' own statement.
//!
//! Cost: with nobody listening a noted write is its plain statement; otherwise the statement and
//! the note's insert in one transaction.

use std::future::{Future, IntoFuture};

use futures::future::BoxFuture;
use sqlx::any::{Any, AnyArguments, AnyQueryResult, AnyRow};
use sqlx::query::{Query, QueryAs};
use sqlx::{FromRow, IntoArguments};

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, NamesUser};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::store::Store;
use crate::store::machinery::transaction::Transaction;

/// A write as a value: see the module.
pub trait Write: Send + Sync {
    /// What the write answers: whether it applied, the row it wrote.
    type Done: Send;

    /// Runs the write's statements on `on`.
    fn run<'a>(&'a self, on: On<'a, '_>) -> impl Future<Output = StoreResult<Self::Done>> + Send + 'a;

    /// Whether the write changed what it was for. A note is written only then, and a
    /// transaction of the write's own that did not is rolled back.
    fn applied(done: &Self::Done) -> bool;
}

/// Where a write's statements run.
pub enum On<'a, 'p> {
    /// Alone: through the store's handles, each statement bounded and declaring its effect.
    Alone(&'a Store),
    /// On another write's (or a note's) transaction, which bounds them as a whole; each
    /// statement declares its effect on the transaction.
    Within(&'a mut Transaction<'p>),
}

impl On<'_, '_> {
    /// Runs `query` to its end, doing `effect` to the caches.
    pub async fn execute<'q>(
        self,
        effect: CacheEffect<'_>,
        query: Query<'q, Any, AnyArguments<'q>>,
    ) -> Result<AnyQueryResult, sqlx::Error> {
        match self {
            On::Alone(store) => query.execute(store.write(effect)).await,
            On::Within(tx) => {
                tx.declare(effect);
                query.execute(&mut **tx).await
            }
        }
    }

    /// The first row `query` returns, doing `effect` to the caches.
    pub async fn fetch_optional<'q, O>(
        self,
        effect: CacheEffect<'_>,
        query: QueryAs<'q, Any, O, AnyArguments<'q>>,
    ) -> Result<Option<O>, sqlx::Error>
    where
        O: Send + Unpin + for<'r> FromRow<'r, AnyRow>,
    {
        match self {
            On::Alone(store) => query.fetch_optional(store.write(effect)).await,
            On::Within(tx) => {
                tx.declare(effect);
                query.fetch_optional(&mut **tx).await
            }
        }
    }

    /// The row a statement about one user's row returns: the user it names is the one whose
    /// caches move (see [`super::cache_effect::WriteReturningUser`]).
    pub async fn fetch_naming_user<'q, O, A>(self, query: QueryAs<'q, Any, O, A>) -> Result<Option<O>, sqlx::Error>
    where
        A: 'q + IntoArguments<'q, Any>,
        O: Send + Unpin + for<'r> FromRow<'r, AnyRow> + NamesUser,
    {
        match self {
            On::Alone(store) => store.write_returning_user().fetch_optional(query).await,
            On::Within(tx) => {
                let row = query.fetch_optional(&mut **tx).await?;
                if let Some(row) = &row {
                    tx.declare(CacheEffect::User(row.user_id()));
                }
                Ok(row)
            }
        }
    }
}

/// What is written beside a write when someone listens: a webhook event
/// (`crate::store::webhooks`).
pub trait Note: Sync {
    /// Whether anyone would hear of it; asked before every noted write, so it must be cheap
    /// (cached) when nobody listens.
    fn wanted<'a>(&'a self, store: &'a Store) -> impl Future<Output = StoreResult<bool>> + Send + 'a;

    /// Writes it on `tx`, stamped `now`.
    fn write_in<'a>(
        &'a self,
        tx: &'a mut Transaction<'_>,
        now: Timestamp,
    ) -> impl Future<Output = StoreResult<()>> + Send + 'a;

    /// Once the transaction that wrote it committed.
    fn written(&self, store: &Store);
}

/// A write of several statements: its steps run in the transaction it is given (another write's,
/// or its note's), or alone in one transaction of its own, bounded as one call, committed when
/// it applied and rolled back when it did not.
pub trait Steps: Send + Sync {
    type Done: Send;

    /// Runs the statements, each declaring its effect on `tx`.
    fn steps<'a>(&'a self, tx: &'a mut Transaction<'_>) -> impl Future<Output = StoreResult<Self::Done>> + Send + 'a;

    /// As [`Write::applied`].
    fn applied(done: &Self::Done) -> bool;
}

impl<S: Steps> Write for S {
    type Done = S::Done;

    async fn run(&self, on: On<'_, '_>) -> StoreResult<S::Done> {
        match on {
            On::Within(tx) => self.steps(tx).await,
            On::Alone(store) => {
                store
                    .bounded(async {
                        let mut tx = store.begin(CacheEffect::Nothing).await?;
                        let done = self.steps(&mut tx).await?;
                        if S::applied(&done) {
                            tx.commit().await?;
                        } else {
                            tx.rollback().await?;
                        }
                        Ok(done)
                    })
                    .await
            }
        }
    }

    fn applied(done: &S::Done) -> bool {
        S::applied(done)
    }
}

/// A write ready to run: `.await` runs it alone, [`Written::noting`] beside a note.
#[must_use = "a write does nothing until it is awaited"]
pub struct Written<'s, W> {
    store: &'s Store,
    write: W,
}

impl<'s, W: Write + 's> Written<'s, W> {
    pub(in crate::store) fn new(store: &'s Store, write: W) -> Self {
        Self { store, write }
    }

    /// Runs the write with `note` beside it, stamped `now`, in one transaction when someone
    /// listens (see the module); alone otherwise, or without a note.
    pub async fn noting<N: Note>(self, note: Option<&N>, now: Timestamp) -> StoreResult<W::Done> {
        let Written { store, write } = self;
        let note = match note {
            Some(note) if note.wanted(store).await? => note,
            _ => return write.run(On::Alone(store)).await,
        };
        let done = store
            .bounded(async {
                let mut tx = store.begin(CacheEffect::Nothing).await?;
                let done = write.run(On::Within(&mut tx)).await?;
                if !W::applied(&done) {
                    tx.rollback().await?;
                    return Ok(done);
                }
                note.write_in(&mut tx, now).await?;
                tx.commit().await?;
                Ok(done)
            })
            .await?;
        if W::applied(&done) {
            note.written(store);
        }
        Ok(done)
    }

    /// Runs the write's statements within `tx`, another write's transaction.
    pub(in crate::store) async fn within(self, tx: &mut Transaction<'_>) -> StoreResult<W::Done> {
        self.write.run(On::Within(tx)).await
    }
}

impl<'s, W: Write + 's> IntoFuture for Written<'s, W> {
    type Output = StoreResult<W::Done>;
    type IntoFuture = BoxFuture<'s, StoreResult<W::Done>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { self.write.run(On::Alone(self.store)).await })
    }
}
