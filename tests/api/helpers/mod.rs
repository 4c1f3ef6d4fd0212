//! `spawn_app` runs the real application on a random port with a fresh database (SQLite in a
//! temp dir, or a fresh PostgreSQL database) and a clock the test controls. `TestApp` has a
//! real rmcp client (`mcp_client`) and a cookie-keeping HTTP client that plays the browser
//! (`browser`), plus one helper per step of the flow.
//!
//! Everything more than one test file needs lives here, and only here: a test file imports from
//! `crate::helpers` and never from another test file (`structure::test_imports` fails when one
//! does). The app and its clients are re-exported at the top (`crate::helpers::spawn_app`); each
//! fixture is a module named by what it gives (`crate::helpers::gateway::Upstream`).
//!
//! # Layout
//! - `app`: [`spawn_app`] and its options, [`TestApp`] and what it knows of the running app.
//! - `mcp_client`: [`McpClient`], a real rmcp client that records what the server sends.
//! - `flow`: the browser's leg of the connect flow, as methods of [`TestApp`].
//! - `pages`: reading a page's forms and a redirect's target.
//! - `database`: a fresh PostgreSQL database per app; [`EmptyDatabase`] for the migrations.
//! - `eventually`: [`eventually`], the one way a test waits.
//! - Fixtures, each named by what it gives: `admin`, `authorization_server`, `browser`, `cli`,
//!   `cluster`, `db_proxy`, `demo_tool`, `gateway`, `holding_provider`, `python`,
//!   `quirky_provider`, `round_trips`, `rust_source`, `streams`, `strict_provider`, `token_api`,
//!   `upgrade`, `webhooks`.

mod app;
mod database;
mod eventually;
mod flow;
mod mcp_client;
pub mod pages;

pub mod admin;
pub mod authorization_server;
pub mod browser;
pub mod cli;
pub mod cluster;
pub mod db_proxy;
pub mod demo_tool;
pub mod gateway;
pub mod holding_provider;
pub mod python;
pub mod quirky_provider;
pub mod round_trips;
pub mod rust_source;
pub mod streams;
pub mod strict_provider;
pub mod token_api;
pub mod upgrade;
pub mod webhooks;

pub use app::*;
pub use cli::binary;
pub use database::*;
pub use eventually::*;
pub use mcp_client::*;
pub use pages::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub const ALICE: &str = "alice";
pub const BOB: &str = "bob";
pub const PASSWORD: &str = "correct-horse-battery";

/// Runs a test body on SQLite and on PostgreSQL. Without a PostgreSQL server the second run
/// prints `SKIPPED postgres: …`, unless `REQUIRE_POSTGRES=1`, where it fails.
#[macro_export]
macro_rules! on_both_backends {
    ($name:ident, $body:ident) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let app = $crate::helpers::spawn_app($crate::helpers::Backend::Sqlite).await.unwrap();
                $body(&app).await;
                app.stop().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(app) = $crate::helpers::spawn_app($crate::helpers::Backend::Postgres).await else { return };
                $body(&app).await;
                app.stop().await;
            }
        }
    };
}
