//! The prompt catalogue (MCP 2025-11-25 server/prompts).
//!
//! Three sources, merged in this order, the first of a name winning (later duplicates are
//! skipped with a warning):
//! - [`builtin`]: the broker's own prompts (connect, review, use an API);
//! - operator files in `prompts_dir` ([`files`] parses one, [`image`] reads its images, [`load`]
//!   the directory, [`render`] fills `{{placeholders}}`), kept current by [`watch`];
//! - extensions ([`crate::mcp::extension::Extension::prompts`]).
//!
//! `prompts/get` checks arguments ([`args`]) the same way for all three before rendering.
//!
//! [`catalogue`] holds them together ([`PromptCatalogue`]).

pub mod args;
pub mod builtin;
pub mod catalogue;
pub mod files;
pub mod image;
pub mod load;
pub mod render;
pub mod watch;

pub use catalogue::{Found, Origin, PromptCatalogue, unknown_prompt};
