//! Gateway mode: MCP servers behind the broker, each in its own process, called through the
//! broker's `/mcp` with each user's own credential.

mod consent;
mod content;
mod content_questions;
mod elicitation;
mod faults;
mod forwarding;
mod instances;
mod logs;
mod mcp_oauth;
mod python;
mod round_trips;
mod shared_lists;
mod stateless;
mod stateless_subscriptions;
mod subscriptions;
mod token_exchange;
