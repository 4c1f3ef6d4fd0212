//! The command line: `serve`, `migrate` and the operator's `admin …` commands. Every command
//! reads the same settings ([`SettingsArgs`]), so `admin` finds the server's database and keys.

mod demo;
mod grants;
mod services;
mod users;

use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::clock::SystemClock;
use crate::config::{Config, SettingsArgs};

#[derive(Parser, Debug)]
#[command(
    name = "oauth-broker",
    version,
    about = "An MCP server that connects AI tools to third-party accounts without exposing credentials"
)]
pub struct Cli {
    #[command(flatten)]
    pub settings: SettingsArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the broker (MCP endpoint, hosted pages, demo provider with --demo).
    Serve,
    /// Create or upgrade the database schema and exit.
    Migrate {
        /// List the migrations this binary knows instead of applying them.
        #[arg(long)]
        status: bool,
    },
    /// Inspect and repair the broker's data.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// Local user accounts.
    Users {
        #[command(subcommand)]
        command: users::UsersCommand,
    },
    /// Bearer tokens for MCP clients.
    Tokens {
        #[command(subcommand)]
        command: users::TokensCommand,
    },
    /// Stored third-party grants (never shows token values).
    Grants {
        #[command(subcommand)]
        command: grants::GrantsCommand,
    },
    /// Which clients users allowed to use which connections (consent per client).
    Consents {
        #[command(subcommand)]
        command: grants::ConsentsCommand,
    },
    /// Tool servers registered for the token API (client credentials, providers).
    Services {
        #[command(subcommand)]
        command: services::ServicesCommand,
    },
    /// Connect attempts (elicitations) and their state.
    Authorizations {
        #[command(subcommand)]
        command: grants::AuthorizationsCommand,
    },
    /// A consistent copy of the database while the server runs (SQLite `VACUUM INTO`); back up
    /// the encryption key beside it. For PostgreSQL use `pg_dump`.
    Backup {
        /// Where to write the copy (must not exist yet).
        file: std::path::PathBuf,
    },
    /// The audit log, newest first.
    Audit {
        /// Only this user's entries (username).
        #[arg(long)]
        user: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: i64,
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = Config::load(&cli.settings)?;
    match cli.command {
        Command::Serve => serve(config).await,
        Command::Migrate { status } => migrate(config, status).await,
        Command::Admin { command } => {
            let state = crate::app::open_existing_state(config, Arc::new(SystemClock)).await?;
            let result = match command {
                AdminCommand::Users { command } => users::run_users(&state, command).await,
                AdminCommand::Tokens { command } => users::run_tokens(&state, command).await,
                AdminCommand::Grants { command } => grants::run_grants(&state, command).await,
                AdminCommand::Consents { command } => grants::run_consents(&state, command).await,
                AdminCommand::Services { command } => services::run_services(&state, command).await,
                AdminCommand::Authorizations { command } => grants::run_authorizations(&state, command).await,
                AdminCommand::Audit { user, limit, json } => grants::run_audit(&state, user, limit, json).await,
                AdminCommand::Backup { file } => backup(&state, &file).await,
            };
            state.store.close().await;
            result
        }
    }
}

async fn serve(config: Config) -> anyhow::Result<()> {
    let listener =
        tokio::net::TcpListener::bind(config.listen).await.with_context(|| format!("binding {}", config.listen))?;
    let demo = config.demo;
    let app = crate::App::build(config, Arc::new(SystemClock)).await?;
    let state = app.state().clone();
    tracing::info!(mcp = %state.config.mcp_url(), database = %crate::app::redact_database_url(&state.config.database_url), "oauth-broker listening on {}", state.config.listen);
    if demo {
        demo::print_demo_setup(&state).await?;
    }
    app.run(listener, shutdown_signal()).await.context("serving")?;
    // Fold SQLite's write-ahead log into the database file, so a copy of the `.db` file alone
    // after a stop holds everything.
    if let Err(error) = state.store.checkpoint().await {
        tracing::warn!(%error, "could not checkpoint the database on shutdown");
    }
    state.store.close().await;
    tracing::info!("stopped");
    Ok(())
}

async fn backup(state: &crate::state::AppState, file: &std::path::Path) -> anyhow::Result<()> {
    if state.store.backend() == crate::store::Backend::Postgres {
        anyhow::bail!(
            "the database is PostgreSQL: back it up with `pg_dump --format=custom DATABASE_URL > FILE` \
             (restore with `pg_restore`), and keep the encryption key with it"
        );
    }
    if file.exists() {
        anyhow::bail!("{} already exists; choose a new file (nothing was written)", file.display());
    }
    state.store.backup_to(file).await.with_context(|| format!("writing the copy to {}", file.display()))?;
    let key = state.config.data_dir.join("encryption.key");
    println!("database copied to {}", file.display());
    if state.config.encryption_key.is_none() {
        println!("also back up {} — without it the copy's tokens cannot be read", key.display());
    } else {
        println!(
            "also back up the encryption key (OAUTH_BROKER_ENCRYPTION_KEY) — without it the copy's tokens cannot be read"
        );
    }
    Ok(())
}

async fn migrate(config: Config, status: bool) -> anyhow::Result<()> {
    let store = crate::store::Store::connect_with(&config.database_url, config.database_timeouts())
        .await
        .with_context(|| format!("connecting to {}", crate::app::redact_database_url(&config.database_url)))?;
    if status {
        for (version, description) in store.known_migrations() {
            println!("{version:>4}  {description}");
        }
        store.close().await;
    } else {
        store.close().await;
        // The whole initialisation `serve` does — schema, sealing key, first signing key — so
        // every `admin` command after it finds a complete data directory (and none creates one).
        let state = crate::app::build_state(config, Arc::new(SystemClock)).await?;
        println!("database is up to date ({} migrations)", state.store.known_migrations().len());
        state.store.close().await;
    }
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
}
