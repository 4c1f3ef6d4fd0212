//! What happened: the audit log of security events, and what the admin console reads of it and
//! of the rest (hourly counts, providers' health, bounded counts, filtered lists).
//!
//! - [`log`]: the append-only log: who acted, on whose behalf, what, how it ended;
//! - [`lists`]: the admin lists' filters and sort orders;
//! - [`console`]: the dashboard's counts and charts.

pub(in crate::store) mod console;
pub(in crate::store) mod lists;
pub(in crate::store) mod log;

pub use console::{AdminCounts, HourCount, ProviderHealth};
pub use lists::{AUTHORIZATION_STATUSES, AuditFilter};
pub use log::{Actor, AuditEntry, AuditEvent, Outcome, implied_actor, quoted};
