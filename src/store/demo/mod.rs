//! The demo provider's tables (`src/demo_provider/`): its codes, tokens and notes, and its API
//! keys.
//!
//! - [`tokens`]: authorization codes, access and refresh tokens, and the notes its API serves;
//! - [`api_keys`]: the API keys its key-based API accepts.

pub(in crate::store) mod api_keys;
pub(in crate::store) mod tokens;

pub use api_keys::DemoApiKeyRow;
pub use tokens::{DemoCodeRow, DemoNoteRow, DemoTokenKind, DemoTokenRow, NewDemoToken};
