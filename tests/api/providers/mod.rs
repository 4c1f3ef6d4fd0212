//! The third parties: real providers' quirks, API-key providers, and a token's lifecycle at the
//! provider as the user sees it.

mod api_keys;
mod lifecycle;
mod quirks;
