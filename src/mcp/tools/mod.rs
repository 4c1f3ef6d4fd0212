//! The broker's own tools (MCP 2025-11-25 server/tools), each a type: its arguments parsed once
//! into the value, then one `run` with the request's [`crate::mcp::context::Context`].
//!
//! - [`call`]: one `tools/call` from the schema check to the answer, and [`call::BrokerTool`],
//!   the one match that builds a tool and the one that runs it.
//! - [`catalogue`]: the tools as the client is shown them (names, schemas, annotations);
//!   [`schema`]: the served list with its input schemas compiled once, checked before any tool
//!   runs.
//! - The tools: [`list_connections`], [`connect_account`], [`disconnect_account`],
//!   [`provider_request`].
//! - What they share: [`accounts`] (which of the user's accounts at a provider), [`asking`] (a
//!   form, in the client's era). The access decision they share with the servers behind the
//!   broker and the extension API is [`crate::mcp::access`].
//!
//! A new tool: a file here with its type (`Deserialize` for its arguments) and its `run`, an
//! entry in [`catalogue`] and an arm in each match of [`call::BrokerTool`].

pub mod accounts;
pub mod asking;
pub mod call;
pub mod catalogue;
pub mod connect_account;
pub mod disconnect_account;
pub mod list_connections;
pub mod provider_request;
pub mod schema;
