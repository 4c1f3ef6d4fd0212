//! One request forwarded to a server behind the broker, read top to bottom:
//!
//! - Where a request comes in: [`tool_call`] (`tools/call`), [`content`] (`prompts/get`,
//!   `resources/read`), [`subscribe`] (`resources/subscribe`, and a 2026-07-28 listen's
//!   subscriptions), [`own_resources`] (a user's own resources on the servers that act as the
//!   user).
//! - [`forwarded`]: the request as one value ([`forwarded::Forward`]) handed down every step.
//! - [`gates`]: the gates every forwarded request passes, in order; [`credential`]: the calling
//!   user's credential (steps 0 and 1).
//! - [`rounds`]: the attempt with a 2026-07-28 server's round trips relayed in the client's
//!   era; [`attempt`]: one attempt over the user's connection and its end as the gates take it;
//!   [`upstream_listen`]: a subscription to a stateless server, as a listen of the broker's.
//! - [`in_flight`]: waiting on a request in flight (progress, log messages, the server's
//!   questions, the timeout, cancellation); [`flights`]: the request in flight, and the table
//!   where one waits for a 2026-07-28 client's retry; [`questions`]: a server's question asked
//!   of the user's client.
//! - The server's links: [`server_pages`] (its own `-32042`, relayed as its pages),
//!   [`brokers_link`] (a `token-exchange` server passing on the broker's own link).
//! - [`outcome`]: the answer and outcome label, the retryable answer for a server that did not
//!   answer, the audit entry and metric; [`failure`]: why an attempt got no answer.
//! - [`flight_home`], [`retry_forward`]: a flight's retry that reaches another instance is
//!   passed on to the instance whose call waits for it.

pub mod attempt;
pub mod brokers_link;
pub mod content;
pub mod credential;
pub mod failure;
pub mod flight_home;
pub mod flights;
pub mod forwarded;
pub mod gates;
pub mod in_flight;
pub mod outcome;
pub mod own_resources;
pub mod questions;
pub mod retry_forward;
pub mod rounds;
pub mod server_pages;
pub mod subscribe;
pub mod tool_call;
pub mod upstream_listen;
