//! End-to-end tests: the real server on a random port, a real database (SQLite and
//! PostgreSQL), rmcp's client, a cookie-keeping HTTP client as the browser, and the strict demo
//! provider as the third party.
//!
//! One folder per face or room, its `mod.rs` saying what it tests; what more than one test file
//! needs is in `helpers/`, and no test file imports another (`structure::test_imports`).

mod helpers;

mod authorization_server;
mod gateway;
mod mcp;
mod operating;
mod organizations;
mod providers;
mod refresh;
mod structure;
mod token_api;
mod web;
mod webhooks;
