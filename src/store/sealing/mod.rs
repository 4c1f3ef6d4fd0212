//! What is sealed and with which key: the broker's JWT signing keys, and the inventory of every
//! sealed value in the database that `admin keys status`, `rewrap` and `forget` work on (each
//! room rewraps its own values).
//!
//! - [`signing_keys`]: the JWT signing keys, their private halves sealed ([`SigningKeys`]);
//! - [`inventory`]: every sealed value by the key that sealed it ([`Sealed`]);
//! - [`key_ids`]: the key that sealed a value, read from the value itself;
//! - [`app_secrets`]: organizations' app secrets across organizations, for key management.

pub(in crate::store) mod app_secrets;
pub(in crate::store) mod inventory;
pub(in crate::store) mod key_ids;
pub(in crate::store) mod signing_keys;

pub use app_secrets::SealedAppSecret;
pub use inventory::{ForgottenValues, Sealed, SealedColumn, SealedCount};
pub use signing_keys::{SealedSigningKey, SigningKeyRow, SigningKeys};
