//! The demo provider's tables (`src/demo_provider/`), all through one handle ([`Demo`]).
//!
//! - [`codes`]: its authorization codes;
//! - [`tokens`]: its access and refresh tokens (the only ones cached);
//! - [`notes`]: the notes its API serves;
//! - [`api_keys`]: the API keys its key-based API accepts;
//! - [`clients`]: the clients registered with it besides the broker's own.

pub(in crate::store) mod api_keys;
pub(in crate::store) mod clients;
pub(in crate::store) mod codes;
pub(in crate::store) mod notes;
pub(in crate::store) mod tokens;

pub use api_keys::DemoApiKeyRow;
pub use clients::DemoClientRow;
pub use codes::DemoCodeRow;
pub use notes::DemoNoteRow;
pub use tokens::{Demo, DemoTokenKind, DemoTokenRow, NewDemoToken};
