//! A transaction and what its writes do to the caches of reads ([`super::cache_effect`]).
//!
//! The effect is declared when it begins, and each statement run within it by a write that may
//! also run alone ([`super::write::On`]) adds its own as it runs ([`Transaction::declare`]), so a
//! transaction that writes a grant beside an event moves that grant's user and nobody else.
//! Every declared effect applies once the commit is done or given up on (it may still land); a
//! transaction rolled back, or dropped without committing, moves nothing.

use sqlx::AnyConnection;
use sqlx::any::Any;

use crate::store::machinery::cache_effect::{CacheEffect, Landing};
use crate::store::machinery::declared;
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::generations::Generations;
use crate::store::machinery::store::{Backend, Store};

impl Store {
    /// Begins a transaction whose writes do `effect` to the caches, once it commits. Bound it
    /// with [`Store::bounded`].
    pub(in crate::store) async fn begin<'a>(&'a self, effect: CacheEffect<'a>) -> StoreResult<Transaction<'a>> {
        // On SQLite a transaction takes the write lock when it begins. A deferred one (`BEGIN`)
        // that reads first and writes later cannot wait for another writer: once another
        // connection has committed since its read, SQLite answers SQLITE_BUSY at once, past
        // busy_timeout, and the request that wrote fails. `BEGIN IMMEDIATE` waits its turn in
        // the busy handler instead. PostgreSQL locks rows, not the database.
        let mut tx = match self.backend() {
            Backend::Sqlite => self.pool().begin_with("BEGIN IMMEDIATE").await?,
            Backend::Postgres => self.pool().begin().await?,
        };
        let before = declared::before_write(&mut tx, matches!(effect, CacheEffect::Nothing)).await;
        Ok(Transaction { tx, store: self, effect, declared: Vec::new(), before })
    }
}

/// A transaction with what its writes do to the caches; statements run on `&mut *tx`. The
/// generation moves when [`Transaction::commit`] is done or given up on; a transaction dropped
/// without committing is rolled back and moves nothing.
pub struct Transaction<'p> {
    tx: sqlx::Transaction<'static, Any>,
    store: &'p Store,
    effect: CacheEffect<'p>,
    /// What its statements declared as they ran, besides `effect`.
    declared: Vec<Moves>,
    /// Debug builds: what [`super::declared`] compares at the commit.
    before: declared::Before,
}

/// An effect a statement declared within a transaction, kept until the commit.
enum Moves {
    User(String),
    Everyone,
}

impl<'p> Transaction<'p> {
    /// The store this transaction is on: another room's statements run within it are built
    /// from its handles.
    pub fn store(&self) -> &'p Store {
        self.store
    }

    /// A statement run within this transaction does `effect` to the caches (once it commits).
    pub fn declare(&mut self, effect: CacheEffect<'_>) {
        match effect {
            CacheEffect::User(user_id) => self.declared.push(Moves::User(user_id.to_owned())),
            CacheEffect::Everyone => self.declared.push(Moves::Everyone),
            CacheEffect::Nothing => {}
        }
    }

    pub async fn commit(self) -> Result<(), sqlx::Error> {
        let Transaction { mut tx, store, effect, declared, before } = self;
        let generations = &*store.generations;
        if declared.is_empty() {
            declared::after(&mut tx, before, "a transaction").await;
        }
        // Armed across the commit: a commit given up on may still land.
        let _landing = Landing::new(generations, effect);
        let _declared = Declared { generations, moves: declared };
        tx.commit().await
    }

    /// Rolls back: nothing was written.
    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        self.tx.rollback().await
    }
}

/// The declared effects of a commit on its way, applied when it is done or given up on.
struct Declared<'p> {
    generations: &'p Generations,
    moves: Vec<Moves>,
}

impl Drop for Declared<'_> {
    fn drop(&mut self) {
        for moved in &self.moves {
            match moved {
                Moves::User(user_id) => self.generations.move_user(user_id),
                Moves::Everyone => self.generations.move_everyone(),
            }
        }
    }
}

impl std::ops::Deref for Transaction<'_> {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        &self.tx
    }
}

impl std::ops::DerefMut for Transaction<'_> {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        &mut self.tx
    }
}
