//! End-to-end tests: the real server on a random port, a real database (SQLite and
//! PostgreSQL), rmcp's client, a cookie-keeping HTTP client as the browser, and the strict demo
//! provider as the third party.

mod helpers;

mod bearer;
mod cli;
mod flow;
mod logs;
mod protocol;
mod provider_request;
mod refresh;
mod review;
mod security;
