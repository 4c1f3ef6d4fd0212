//! Delivering webhook events to services, after the Standard Webhooks convention.
//!
//! Events are rows of the outbox (`crate::store::webhooks`), written in the transaction
//! of the change they report. A background task on every instance ([`start`]) delivers them:
//! - **promptly**: the store wakes it after a commit on this instance; a poll every
//!   `[webhooks] poll_interval` is the backstop (other instances' events, retries);
//! - **once per attempt across instances**: an attempt is claimed with a compare-and-swap and a
//!   lease; a killed instance's lease lapses and another takes over. Delivery is at least once:
//!   a receiver that answered but whose answer was lost gets the event again, with the same id;
//! - **in order per connection**: only the oldest pending event of a (service, connection) is
//!   ever due;
//! - **with backoff**: 5 s doubling to an hour, plus up to half again at random, within
//!   `[webhooks] retry_window` of the event; then the event is dead-lettered (`admin webhooks
//!   list --status dead`, re-sent with `admin webhooks resend`);
//! - a receiver's 2xx is delivered; 410 Gone disables the webhook (audited); anything else, a
//!   timeout or a refused connection is retried.
//!
//! - [`deliveries`]: what the delivery task works with, and how it claims due attempts.
//! - [`worker`]: the task itself ([`start`]), up to 64 attempts at once.
//! - [`deliver`]: one attempt (sign, POST, record the answer) and the retry schedule.
//! - [`endpoint`]: which receiver URLs are allowed, and the HTTP client that reaches them.
//! - [`signing`]: webhook secrets and the Standard Webhooks signature.

mod deliver;
mod deliveries;
pub mod endpoint;
pub mod signing;
mod worker;

pub use deliver::{RETRY_BASE_SECONDS, RETRY_MAX_SECONDS, retry_delay};
pub use deliveries::Deliveries;
pub use worker::start;
