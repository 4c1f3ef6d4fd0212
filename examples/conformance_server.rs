//! The broker with the fixtures of the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`), for `.ci/conformance.sh`.
//!
//! `cargo run --release --example conformance_server -- --listen 127.0.0.1:PORT`
//!
//! It builds the real server through the public extension API — the fixtures (tools
//! `test_simple_text`, …, the 2026-07-28 diagnostic tools `test_input_required_result_…`,
//! `test_missing_capability`, …, prompts `test_simple_prompt`, …, resources
//! `test://static-text`, …) live in [`conformance`] and never in the product's catalogue. The suite sends no bearer token,
//! so /mcp requests without one act as the fixed local user `conformance`; requests that carry a
//! token are still verified. Data (SQLite, generated keys) goes to a temporary directory that is
//! removed on exit. Port 0 picks a free port; the first line on stdout names the endpoint.

mod conformance;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use oauth_broker::clock::SystemClock;
use oauth_broker::config::SettingsArgs;
use oauth_broker::{App, Config};
use tokio::net::TcpListener;
use url::Url;

#[derive(Parser)]
#[command(about = "The broker plus the MCP conformance suite's fixtures, on a throwaway database")]
struct Args {
    /// Address to listen on; loopback only, since the server has a fixed identity.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    anyhow::ensure!(args.listen.ip().is_loopback(), "--listen must be a loopback address (the identity is fixed)");

    let listener = TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    let data_dir = tempfile::Builder::new().prefix("oauth-broker-conformance-").tempdir()?;
    let settings = SettingsArgs {
        listen: Some(addr),
        // Host and Origin are allow-listed from this URL (plus the loopback names).
        public_url: Some(Url::parse(&format!("http://{addr}"))?),
        data_dir: Some(data_dir.path().to_owned()),
        ..Default::default()
    };
    let config = Config::from_toml(&settings, "")?;
    let app = App::builder(config, Arc::new(SystemClock))
        .extension(conformance::Fixtures::new()?)
        .fixed_identity_for_tests("conformance")
        .build()
        .await?;

    println!("listening on http://{addr}/mcp");
    app.run(listener, shutdown_signal()).await?;
    drop(data_dir);
    Ok(())
}

/// Ctrl-C or SIGTERM (what `.ci/conformance.sh` sends), so the temporary directory is removed.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
