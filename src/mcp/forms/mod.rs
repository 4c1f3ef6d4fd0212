//! Form-mode elicitation (MCP 2025-11-25 client/elicitation §Form mode).
//!
//! - [`schema`]: typed fields → `requestedSchema`, refusing anything outside the 2025-11-25
//!   subset and any field that reads like a request for a secret.
//! - [`field`]: the plain pieces both use: a field, its kind, an answer's value and its check.
//! - `parse`: reads a hand-written `requestedSchema` under the same rules.
//! - [`content`]: checks an accepted answer against the form before anything uses it.
//! - [`questions`]: the broker's own questions — which scopes, which account, confirm a
//!   disconnect — and the tool results for answers that are not a yes.
//! - [`ask`]: sends `elicitation/create` in form mode on the tool call's own stream and tells
//!   accept, decline and cancel apart.
//!
//! Only clients that declared form mode are asked ([`form_mode`]; an empty `elicitation: {}`
//! counts as form). Every caller has a path for the others: a default or a clear message.

pub mod ask;
pub mod content;
pub mod field;
mod parse;
pub mod questions;
pub mod schema;

pub use ask::{AskError, Reply, ask, form_mode};
pub use content::Answers;
pub use field::{Answer, Choice, ContentError, Field, TextFormat};
pub use schema::{FormSchema, SchemaError};
