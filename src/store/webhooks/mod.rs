//! Services' webhooks and their outbox: where each service hears of the connections it may
//! use, and the events on their way there.
//!
//! - [`endpoints`]: a service's webhook (URL, sealed signing secrets) and which providers and
//!   services have one at all ([`Webhooks`]);
//! - [`events`]: what happened to a connection, written beside the change it reports;
//! - [`outbox`]: the events, one row per event per service, and their deliveries
//!   ([`WebhookEvents`]).

pub(in crate::store) mod endpoints;
pub(in crate::store) mod events;
pub(in crate::store) mod outbox;

pub use endpoints::{SealedWebhookSecrets, WebhookRow, WebhookTargets, WebhookWake, Webhooks};
pub use events::{EventType, NewEvent};
pub use outbox::{AttemptOutcome, DeliveryRow, DeliveryStatus, WebhookEvents};
