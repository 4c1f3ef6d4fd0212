//! What the token API (`src/api/`) keeps: the tool servers registered to use it, their limits
//! and request budgets, and its audit events on their way to the database.
//!
//! - [`services`]: registered services ("tool servers"), kept in memory by client id
//!   ([`Services`]);
//! - [`limits`]: concurrent waits and sliding-window budgets, shared by every instance
//!   ([`ApiLimits`]);
//! - [`budget`]: each service's request budget, in shares leased by each instance
//!   ([`RequestBudgets`]);
//! - [`audit_queue`]: the token API's audit events, queued and written in batches
//!   ([`AuditQueue`]).

pub(in crate::store) mod audit_queue;
pub(in crate::store) mod budget;
pub(in crate::store) mod limits;
pub(in crate::store) mod services;

pub use audit_queue::{AuditQueue, BATCH, CAPACITY, GATHER};
pub use budget::{Budget, MAX_SHARE, RequestBudgets, SHARE_LIFE, WINDOW_NS, most_unused, share_size};
pub use limits::{ApiLimits, UNLOCKED_FRESH};
pub use services::{CACHED, CLIENT_ID_PREFIX, NewService, ServiceRow, Services};
