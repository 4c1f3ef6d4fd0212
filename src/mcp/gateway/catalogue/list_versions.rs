//! Which stored version of each of a server's lists (`store::gateway::lists`) the entry's cached
//! list is, so `super::shared_lists` takes a stored row only if it is newer.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::store::gateway::ListKind;

/// Per list kind, the stored version the cached list is: 0 for none, [`NOT_STORED`] when this
/// process's list could not be stored.
#[derive(Default)]
pub(crate) struct SharedVersions([AtomicI64; 3]);

/// This process's list is newer than what is stored: the next read stores it.
pub(crate) const NOT_STORED: i64 = -1;

impl SharedVersions {
    fn slot(&self, kind: ListKind) -> &AtomicI64 {
        &self.0[match kind {
            ListKind::Tools => 0,
            ListKind::Prompts => 1,
            ListKind::Resources => 2,
        }]
    }

    pub(crate) fn get(&self, kind: ListKind) -> i64 {
        self.slot(kind).load(Ordering::Acquire)
    }

    pub(crate) fn set(&self, kind: ListKind, version: i64) {
        self.slot(kind).store(version, Ordering::Release);
    }

    /// Whether a read that left the cached list as it was must store it anyway.
    pub(crate) fn not_stored(&self, kind: ListKind) -> bool {
        self.get(kind) == NOT_STORED
    }

    /// An entry that replaces `earlier` (its row changed in place) keeps its lists' versions.
    pub(crate) fn take_over(&self, earlier: &SharedVersions) {
        for (mine, theirs) in self.0.iter().zip(&earlier.0) {
            mine.store(theirs.load(Ordering::Acquire), Ordering::Release);
        }
    }
}
