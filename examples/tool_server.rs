//! A third-party MCP tool server that uses the broker's `demo` provider without ever holding a
//! user's provider credentials of its own: it gets access per call through the broker's token
//! API (`src/api/`), as a registered service (`oauth-broker admin services add …`).
//!
//! ```text
//! cargo run --example tool_server -- --broker http://127.0.0.1:8080 \
//!     --client-id svc_whoami --client-secret obs_… [--mode exchange|proxy] [--listen 127.0.0.1:8090] \
//!     [--input-wait 30s]
//! ```
//!
//! ```text
//! MCP client ─ Bearer <user token, aud = our --resource> ─▶ /mcp   (web.rs: presence only)
//!   tools/call whoami_at_demo ─▶ tool.rs ─▶ broker.rs ─▶ broker /token or /v1/proxy (verifies it)
//!     ok                      → structured result
//!     authorization_required  → 2025-11-25: -32042 with the broker's link; watch.rs long-polls
//!                                 /v1/authorizations/{id} → notifications/elicitation/complete
//!                               2026-07-28: InputRequiredResult (mrtr.rs) with the link and a
//!                                 sealed requestState (request_state.rs); the retry waits on
//!                                 /v1/authorizations/{id} (at most --input-wait), then answers
//!     otherwise               → isError text / MCP error
//! ```
//!
//! Clients discover the broker as our authorization server from the RFC 9728 metadata that the
//! 401 challenge points to. With `--listen 127.0.0.1:0` a free port is chosen; the first line on
//! stdout is `listening on http://ADDR`.

// A crate root's modules live beside it (examples/), so the parts are named by path.
#[path = "tool_server/broker.rs"]
mod broker;
#[path = "tool_server/mrtr.rs"]
mod mrtr;
#[path = "tool_server/request_state.rs"]
mod request_state;
#[path = "tool_server/tool.rs"]
mod tool;
#[path = "tool_server/watch.rs"]
mod watch;
#[path = "tool_server/web.rs"]
mod web;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::serve::ListenerExt;
use clap::Parser;
use secrecy::SecretString;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use url::Url;

use broker::{BrokerClient, Mode};
use request_state::StateSealer;
use tool::Shared;
use web::Resource;

// No `Debug`: the secret must not be printable by accident.
#[derive(Parser)]
#[command(about = "An example MCP tool server that gets demo-provider access through oauth-broker's token API")]
struct Args {
    /// Address to listen on; port 0 picks a free one (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: SocketAddr,
    /// The broker's public URL (its issuer), e.g. http://127.0.0.1:8080.
    #[arg(long)]
    broker: Url,
    /// This service's client id at the broker (`svc_NAME`).
    #[arg(long)]
    client_id: String,
    /// This service's client secret (`obs_…`); prefer the env var, which stays out of `ps`.
    #[arg(long, env = "TOOL_SERVER_CLIENT_SECRET", hide_env_values = true)]
    client_secret: SecretString,
    /// Our own MCP URL as clients reach it (the audience of user tokens, registered with
    /// `--resource` at the broker); default http://ADDR/mcp. Behind a proxy, its path must reach /mcp.
    #[arg(long)]
    resource: Option<Url>,
    /// exchange: get a provider token and call the provider; proxy: let the broker call it.
    #[arg(long, value_enum, default_value_t = Mode::Exchange)]
    mode: Mode,
    /// How long a 2026-07-28 client's retry waits here for the user to finish at the broker
    /// before it is told to retry again (at most 5m; 0s answers at once). Keep it below the
    /// request timeout of the clients you serve (often 60 s).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "30s")]
    input_wait: Duration,
}

/// `--input-wait` above this is refused: a retry is a request a client is holding open.
const MAX_INPUT_WAIT: Duration = Duration::from_secs(300);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();

    let listener = TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    let resource_url = match args.resource {
        Some(url) => url,
        None => Url::parse(&format!("http://{addr}/mcp"))?,
    };
    anyhow::ensure!(matches!(resource_url.scheme(), "http" | "https"), "--resource must be an http(s) URL");
    anyhow::ensure!(resource_url.fragment().is_none(), "--resource must not have a fragment");
    anyhow::ensure!(args.input_wait <= MAX_INPUT_WAIT, "--input-wait must be at most 5m");
    let broker = BrokerClient::new(args.broker, &args.client_id, &args.client_secret).context("--broker")?;
    let sealer = StateSealer::from_client_secret(&args.client_secret)?;
    let resource = Arc::new(Resource { url: resource_url.clone(), authorization_server: broker.issuer() });
    let shutdown = CancellationToken::new();
    let shared =
        Arc::new(Shared { broker, mode: args.mode, shutdown: shutdown.clone(), sealer, input_wait: args.input_wait });
    let router = web::router(shared, resource, allowed_hosts(addr, &resource_url));

    println!("listening on http://{addr}");
    tracing::info!(%addr, resource = %resource_url, mode = ?args.mode, "tool server started");
    // Without TCP_NODELAY every small SSE write waits for the peer's delayed ACK (~40 ms), as in
    // src/app.rs.
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::warn!(%error, "could not set TCP_NODELAY");
        }
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            // Ends SSE streams and authorization watchers, which would otherwise hold shutdown.
            shutdown.cancel();
        })
        .await?;
    Ok(())
}

/// rmcp's DNS-rebinding defence: our resource's host, plus the loopback names on our port when
/// listening locally.
fn allowed_hosts(addr: SocketAddr, resource: &Url) -> Vec<String> {
    let mut hosts = Vec::new();
    if let Some(host) = resource.host_str() {
        hosts.push(match resource.port() {
            Some(port) => format!("{host}:{port}"),
            // Clients leave a default port out of `Host`.
            None => host.to_owned(),
        });
    }
    if addr.ip().is_loopback() {
        let port = addr.port();
        hosts.extend([format!("localhost:{port}"), format!("127.0.0.1:{port}"), format!("[::1]:{port}")]);
    }
    hosts
}

/// Ctrl-C or SIGTERM.
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
    tracing::info!("shutting down");
}
