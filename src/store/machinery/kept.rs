//! What a room keeps in memory beside its rows (a cache of reads, this instance's leased
//! shares of a budget, a queue on its way to the database): one value per type, shared by a
//! store and every clone of it, made the first time a room asks for it.
//!
//! The store's machinery holds these values without knowing any of them: each room declares
//! its own type ([`Kept`]) in its own file and asks for it with `store.kept::<T>()`. A value
//! that must finish its work before the pool closes (the audit events still queued) says so
//! in [`Kept::before_close`], which [`super::store::Store::close`] awaits.

use std::any::{Any, TypeId};
use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;

/// A room's in-memory state, kept by the store.
pub trait Kept: Any + Send + Sync {
    /// Work to finish before the pool closes; nothing by default.
    fn before_close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// The values, by type: a handful, so a scan of a short list under a read lock.
#[derive(Default)]
pub(super) struct KeptValues {
    values: RwLock<Vec<(TypeId, Arc<dyn Kept>)>>,
}

impl std::fmt::Debug for KeptValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptValues").field("values", &self.all().len()).finish()
    }
}

impl KeptValues {
    /// The `T` kept here, made now if there is none yet.
    pub(super) fn get<T: Kept + Default>(&self) -> Arc<T> {
        if let Some(found) = find::<T>(&self.values.read().unwrap_or_else(|p| p.into_inner())) {
            return found;
        }
        let mut values = self.values.write().unwrap_or_else(|p| p.into_inner());
        // Another caller may have made it between the two locks.
        if let Some(found) = find::<T>(&values) {
            return found;
        }
        let made = Arc::new(T::default());
        values.push((TypeId::of::<T>(), made.clone()));
        made
    }

    /// Every value kept so far.
    pub(super) fn all(&self) -> Vec<Arc<dyn Kept>> {
        self.values.read().unwrap_or_else(|p| p.into_inner()).iter().map(|(_, value)| value.clone()).collect()
    }
}

fn find<T: Kept>(values: &[(TypeId, Arc<dyn Kept>)]) -> Option<Arc<T>> {
    let (_, value) = values.iter().find(|(id, _)| *id == TypeId::of::<T>())?;
    let value: Arc<dyn Any + Send + Sync> = value.clone();
    value.downcast::<T>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[derive(Default)]
    struct Counter(AtomicU32);
    impl Kept for Counter {}

    #[derive(Default)]
    struct Other(AtomicU32);
    impl Kept for Other {}

    #[test]
    fn each_type_is_made_once_and_shared_and_types_are_kept_apart() {
        let kept = KeptValues::default();
        kept.get::<Counter>().0.fetch_add(1, Ordering::Relaxed);
        kept.get::<Counter>().0.fetch_add(1, Ordering::Relaxed);
        kept.get::<Other>().0.fetch_add(5, Ordering::Relaxed);
        assert_eq!(kept.get::<Counter>().0.load(Ordering::Relaxed), 2);
        assert_eq!(kept.get::<Other>().0.load(Ordering::Relaxed), 5);
        assert_eq!(kept.all().len(), 2);
    }
}
