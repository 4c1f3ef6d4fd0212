//! Signals that something happened: an authorization reached a final state, a user's
//! connections changed, the prompt catalogue changed.
//!
//! The browser flow and the core publish; MCP sessions, a waiting `connect_account` and the
//! token API's waiters listen, to send `notifications/elicitation/complete` and
//! `notifications/resources/updated` or to wake up. It is a signal, not a queue: the database
//! row is the truth and every listener re-reads it, so a missed signal costs only a
//! notification (which the spec makes optional) and a retried tool call still succeeds from the
//! stored grant.
//!
//! Within a process the signals are a tokio broadcast. On PostgreSQL they also travel to every
//! other instance on the same database: each is appended to an outbox table
//! ([`outbox_writer`]), which a trigger announces with `LISTEN/NOTIFY`; a listener that lost its connection reads what it
//! missed from the table when it is back. A signal is delivered here at once, and to the other
//! instances through the database, never to its sender twice. What travels is JSON with ids
//! only, never a secret; a signal another (newer) instance sends that this one does not know
//! is skipped, so a rolling deploy may add variants.
//!
//! - [`signal`]: what is signalled ([`AuthorizationFinished`], [`Signal`]) and its form on the
//!   wire between instances.
//! - [`bus`]: [`Events`], the in-process broadcast the core publishes on and the faces listen to.
//! - [`outbox_writer`]: this instance's signals, appended to the outbox for the others.
//! - [`outbox_listener`]: the other instances' signals, heard through `LISTEN/NOTIFY` and read
//!   again from the outbox after a reconnect.
//! - [`webhooks`]: events delivered to services' webhooks (an outbox of their own).

mod bus;
mod outbox_listener;
mod outbox_writer;
mod signal;
pub mod webhooks;

pub use bus::Events;
pub use outbox_listener::LISTENER_APPLICATION_NAME;
pub use signal::{AuthorizationFinished, Signal};
