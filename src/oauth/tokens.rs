//! Grants.

#[derive(Debug, Default)]
pub struct RefreshLocks {}
