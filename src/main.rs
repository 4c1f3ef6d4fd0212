//! The `oauth-broker` binary: argument parsing and logging set-up; everything else is in the
//! library.

use oauth_broker::admin::Cli;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse_args();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("OAUTH_BROKER_LOG")
                // rmcp logs every JSON-RPC error response (each -32042 included) at WARN.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn,rmcp=warn,rmcp::service=error")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    match oauth_broker::admin::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
