//! `oauth-broker serve`: the server on its listener until Ctrl-C or SIGTERM ([`shutdown_signal`],
//! which `admin audit --follow` stops on too), then what must be written before the process ends.

use std::sync::Arc;

use anyhow::Context;

use super::demo;
use crate::clock::SystemClock;
use crate::config::Config;

pub(super) async fn serve(config: Config) -> anyhow::Result<()> {
    let listener =
        tokio::net::TcpListener::bind(config.listen).await.with_context(|| format!("binding {}", config.listen))?;
    let demo = config.demo;
    let app = crate::App::build(config, Arc::new(SystemClock)).await?;
    let state = app.state().clone();
    if demo {
        demo::print_demo_setup(&state).await?;
    }
    app.run(listener, shutdown_signal()).await.context("serving")?;
    // What the drain's last callbacks and revocations told the other instances is written
    // before the process ends.
    state.core.events.flush().await;
    // Fold SQLite's write-ahead log into the database file, so a copy of the `.db` file alone
    // after a stop holds everything.
    if let Err(error) = state.core.store.checkpoint().await {
        tracing::warn!(%error, "could not checkpoint the database on shutdown");
    }
    state.core.store.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// Completes on Ctrl-C or SIGTERM. The handlers are installed when this is called, not when
/// the future is first polled: a signal that comes between the two (a command still printing
/// what it read first) is not the default action's, which kills the process.
pub(super) fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt()).ok();
        let mut terminate = signal(SignalKind::terminate()).ok();
        async move {
            let interrupted = async {
                match interrupt.as_mut() {
                    Some(signal) => signal.recv().await,
                    None => std::future::pending().await,
                }
            };
            let terminated = async {
                match terminate.as_mut() {
                    Some(signal) => signal.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = interrupted => {},
                _ = terminated => {},
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
