//! What is sealed and with which key: the broker's JWT signing keys, and the inventory of every
//! sealed value in the database that `admin keys status`, `rewrap` and `forget` work on.
//!
//! - [`signing_keys`]: the JWT signing keys, their private halves sealed;
//! - [`inventory`]: every sealed value by the key that sealed it.

pub(in crate::store) mod inventory;
pub(in crate::store) mod signing_keys;

pub use inventory::{
    ForgottenValues, SealedColumn, SealedCount, SealedGrant, SealedSigningKey, SealedVerifier, SealedWebhookSecrets,
};
pub use signing_keys::SigningKeyRow;
