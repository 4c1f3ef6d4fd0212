//! End-to-end tests: the real server on a random port, a real database (SQLite and
//! PostgreSQL), rmcp's client, a cookie-keeping HTTP client as the browser, and the strict demo
//! provider as the third party.

mod helpers;

mod authorization_server;
mod gateway;
mod mcp;
mod operating;
mod providers;
mod refresh;
mod structure;
mod token_api;
mod web;
mod webhooks;
