//! The command line: `serve`, `migrate` and the operator's `admin …` commands. Every command
//! reads the same settings ([`SettingsArgs`]), so `admin` finds the server's database and keys.
//! This file holds the commands and their dispatch ([`run`]); each command is a file of its own
//! (`serve`, `migrate`, `backup`, `users`, `grants`, `services`, `webhooks`, `servers`,
//! `servers_oauth`, `providers`, `keys`, `audit`, `demo`), printing through `display`.

mod audit;
mod backup;
mod demo;
mod demo_clients;
pub(crate) mod display;
mod grants;
mod keys;
mod migrate;
mod org_apps;
mod org_lookup;
mod orgs;
mod providers;
mod secret_input;
mod serve;
mod servers;
mod servers_oauth;
mod services;
mod users;
mod webhooks;

use std::sync::Arc;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

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

impl Cli {
    /// Parses the process's arguments as [`Parser::parse`] does, with [`command`]'s help.
    pub fn parse_args() -> Self {
        let mut matches = command().try_get_matches().unwrap_or_else(|error| with_hints(error).exit());
        Self::from_arg_matches_mut(&mut matches).unwrap_or_else(|error| error.format(&mut command()).exit())
    }
}

/// Flags an operator reaches for that are spelled otherwise here get a pointer to the one that
/// does the job: there is no `--port` (or `--host`), the port is part of `--listen`.
pub fn with_hints(mut error: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument {
        return error;
    }
    let flag = match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(flag)) => flag.split('=').next().unwrap_or_default().to_owned(),
        _ => return error,
    };
    let hint = match flag.as_str() {
        "--port" | "-p" | "--host" | "--bind" | "--address" => {
            "the address and port to listen on are one setting: --listen IP:PORT (e.g. --listen 127.0.0.1:8080 \
             or --listen 0.0.0.0:8080); if users reach the broker at another address, set --public-url too"
        }
        _ => return error,
    };
    error.insert(ContextKind::Suggested, ContextValue::StyledStrs(vec![hint.into()]));
    error
}

/// The command line, with the global settings listed once, in the top-level help.
///
/// clap repeats every `global = true` argument in every subcommand's help (a known clap behaviour), so
/// six settings buried each command's own options, even on `admin users`. clap copies a global
/// argument into a subcommand only when the subcommand has none with that id, so each
/// subcommand gets a hidden copy instead: still accepted after the subcommand name (its value
/// still reaches [`Cli::settings`]), but not listed. A line under each subcommand's help says
/// where the settings are described.
pub fn command() -> clap::Command {
    let command = Cli::command();
    let globals: Vec<clap::Arg> = command.get_arguments().filter(|arg| arg.is_global_set()).cloned().collect();
    let flags: Vec<String> = globals.iter().filter_map(|arg| arg.get_long()).map(|long| format!("--{long}")).collect();
    let note = format!(
        "Settings ({}) go before or after the command; `oauth-broker --help` describes them.",
        flags.join(", ")
    );
    command.mut_subcommands(|sub| hide_globals(sub, &globals, &note))
}

fn hide_globals(sub: clap::Command, globals: &[clap::Arg], note: &str) -> clap::Command {
    globals
        .iter()
        .fold(sub, |sub, arg| sub.arg(arg.clone().hide(true)))
        .after_help(note.to_owned())
        .mut_subcommands(|sub| hide_globals(sub, globals, note))
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant, reason = "parsed once per command line")]
pub enum Command {
    /// Run the broker (MCP endpoint, hosted pages, demo provider with --demo).
    Serve,
    /// Create or upgrade the database schema and exit.
    Migrate {
        /// Say which migrations are applied and which are pending, and change nothing.
        #[arg(long)]
        status: bool,
    },
    /// The provider catalogue and which providers this configuration enables.
    Providers {
        #[command(subcommand)]
        command: providers::ProvidersCommand,
    },
    /// Inspect and repair the broker's data.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// Organizations and their members (one broker serves many).
    Orgs {
        #[command(subcommand)]
        command: orgs::OrgsCommand,
    },
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
    /// Events delivered to services' webhooks: recent deliveries, dead letters, re-sending.
    Webhooks {
        #[command(subcommand)]
        command: webhooks::WebhooksCommand,
    },
    /// MCP servers behind the broker (gateway mode): their tools on /mcp, each user's credential per call.
    Servers {
        #[command(subcommand)]
        command: servers::ServersCommand,
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
    /// The demo provider's registered clients (one per organization trying its own app).
    Demo {
        #[command(subcommand)]
        command: demo_clients::DemoCommand,
    },
    /// Encryption keys (rotate, rewrap every sealed value, drop) and JWT signing keys.
    Keys {
        #[command(subcommand)]
        command: keys::KeysCommand,
    },
    /// The audit log, newest first.
    Audit {
        /// Only this user's entries (username).
        #[arg(long)]
        user: Option<String>,
        /// How many entries, newest first (1 to 100000).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(i64).range(1..=100_000))]
        limit: i64,
        /// Machine-readable output (times as Unix seconds, users by id and name); with
        /// --follow, one JSON object per line.
        #[arg(long)]
        json: bool,
        /// Keep printing new entries as they are written, oldest first, until Ctrl-C/SIGTERM.
        #[arg(long, short = 'f')]
        follow: bool,
    },
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = Config::load(&cli.settings)?;
    match cli.command {
        Command::Serve => serve::serve(config).await,
        Command::Migrate { status: false } => migrate::migrate(config).await,
        Command::Migrate { status: true } => migrate::status(config).await,
        Command::Providers { command } => providers::run(&config, command),
        Command::Admin { command: AdminCommand::Keys { command: keys::KeysCommand::Forget { key_id, yes } } } => {
            keys::forget(&config, &key_id, yes).await
        }
        Command::Admin { command } => {
            let state = crate::app::open_existing_state(config, Arc::new(SystemClock)).await?;
            let result = match command {
                AdminCommand::Users { command } => users::run_users(&state, command).await,
                AdminCommand::Tokens { command } => users::run_tokens(&state, command).await,
                AdminCommand::Grants { command } => grants::run_grants(&state, command).await,
                AdminCommand::Consents { command } => grants::run_consents(&state, command).await,
                AdminCommand::Orgs { command } => orgs::run_orgs(&state, command).await,
                AdminCommand::Services { command } => services::run_services(&state, command).await,
                AdminCommand::Webhooks { command } => webhooks::run_webhooks(&state, command).await,
                AdminCommand::Servers { command } => servers::run_servers(&state, command).await,
                AdminCommand::Authorizations { command } => grants::run_authorizations(&state, command).await,
                AdminCommand::Audit { user, limit, json, follow } => {
                    audit::run_audit(&state, user, limit, json, follow).await
                }
                AdminCommand::Backup { file } => backup::backup(&state, &file).await,
                AdminCommand::Keys { command } => keys::run_keys(&state, command).await,
                AdminCommand::Demo { command } => demo_clients::run_demo(&state, command).await,
            };
            // Signals to the running servers (a revoked grant's resources/updated) are written
            // off the command's path: wait for them before the process ends.
            state.core.events.flush().await;
            state.core.store.close().await;
            result
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Cli {
        let matches = command().try_get_matches_from(args).unwrap();
        Cli::from_arg_matches(&matches).unwrap()
    }

    #[test]
    fn settings_are_accepted_before_and_after_the_command() {
        let before = parse(&["oauth-broker", "--data-dir", "elsewhere", "--demo", "admin", "users", "list"]);
        let after = parse(&["oauth-broker", "admin", "users", "list", "--data-dir", "elsewhere", "--demo"]);
        for cli in [before, after] {
            assert_eq!(cli.settings.data_dir.as_deref(), Some(std::path::Path::new("elsewhere")));
            assert!(cli.settings.demo);
            assert!(matches!(cli.command, Command::Admin { command: AdminCommand::Users { .. } }));
        }
        let serve = parse(&["oauth-broker", "serve", "--listen", "127.0.0.1:9092"]);
        assert_eq!(serve.settings.listen.map(|a| a.to_string()).as_deref(), Some("127.0.0.1:9092"));
    }

    /// Every command below the top, with its path.
    fn all_subcommands(command: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        for sub in command.get_subcommands() {
            let path = format!("{path} {}", sub.get_name());
            out.push((path.clone(), sub.clone()));
            all_subcommands(sub, path, out);
        }
    }

    #[test]
    fn every_argument_of_every_command_says_what_it_is() {
        let mut top = command();
        top.build();
        let mut commands = vec![("oauth-broker".to_owned(), top.clone())];
        all_subcommands(&top, "oauth-broker".to_owned(), &mut commands);
        for (path, command) in &commands {
            for arg in command.get_arguments().filter(|a| !a.is_hide_set()) {
                assert!(arg.get_help().is_some(), "`{path}`: argument {} has no description", arg.get_id());
            }
        }
    }

    #[test]
    fn a_subcommand_help_lists_its_own_options_and_not_the_six_settings() {
        let mut top = command();
        let top_help = top.render_long_help().to_string();
        for setting in ["--config", "--listen", "--public-url", "--database-url", "--data-dir", "--demo"] {
            assert!(top_help.contains(&format!("      {setting}")), "top-level help lists {setting}: {top_help}");
        }
        for path in [&["admin", "users"][..], &["admin", "consents", "revoke"], &["serve"], &["migrate"]] {
            let mut sub = top.clone();
            for name in path {
                sub = sub.find_subcommand(name).unwrap().clone();
            }
            let help = sub.render_help().to_string();
            for setting in ["--config <", "--listen <", "--public-url <", "--database-url <", "--data-dir <"] {
                assert!(!help.contains(setting), "{path:?} repeats {setting}: {help}");
            }
            assert!(help.contains("`oauth-broker --help` describes them"), "{path:?} says where they are: {help}");
        }
    }
}
