//! What happened: the audit log of security events, and what the admin console reads of it and
//! of the rest (hourly counts, providers' health, bounded counts).
//!
//! - [`log`]: the append-only log: who acted, on whose behalf, what, how it ended ([`Audit`]);
//! - [`quoted`](mod@quoted): text a visitor chose, made safe for an entry's detail;
//! - [`batches`]: entries written in batches (the token API's answers);
//! - [`lists`]: the admin audit list, searched and filtered by outcome;
//! - [`console`]: the dashboard's counts and charts ([`Console`]).

pub(in crate::store) mod batches;
pub(in crate::store) mod console;
pub(in crate::store) mod lists;
pub(in crate::store) mod log;
pub(in crate::store) mod quoted;

pub use console::{AdminCounts, Console, HourCount, ProviderHealth};
pub use lists::AuditFilter;
pub use log::{Actor, Audit, AuditEntry, AuditEvent, Outcome, implied_actor};
pub use quoted::quoted;
