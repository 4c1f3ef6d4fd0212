//! The `oauth-broker` binary: argument parsing and logging set-up; everything else is in the
//! library.

use oauth_broker::admin::Cli;

/// See `Cargo.toml` and `.cargo/config.toml`.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse_args();
    if !matches!(cli.command, oauth_broker::admin::Command::Serve) {
        end_quietly_on_a_closed_pipe();
    }
    // `--log-format json` (or OAUTH_BROKER_LOG_FORMAT, or `log_format` in the file)
    // writes one JSON object per line, with the request's and tool call's spans in it.
    let format = match oauth_broker::config::LogFormat::of(&cli.settings) {
        Ok(format) => format,
        Err(error) => {
            eprintln!("error: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("OAUTH_BROKER_LOG")
        // rmcp logs every JSON-RPC error response (each -32042 included) at WARN.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn,rmcp=warn,rmcp::service=error"));
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        oauth_broker::config::LogFormat::Json => logs.json().with_current_span(true).with_span_list(true).init(),
        oauth_broker::config::LogFormat::Text => {
            logs.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init()
        }
    }
    match oauth_broker::admin::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // Each cause once: a store error writes its source into its own message too.
            eprintln!("error: {}", oauth_broker::error_chain::Chain(error.as_ref()));
            std::process::ExitCode::FAILURE
        }
    }
}

/// A command's output piped into a reader that stops early (`providers list | head -2`) ends the
/// command there, silently, as every Unix tool does. Rust ignores SIGPIPE, so `println!` would
/// panic with a stack trace instead. Not for `serve`: a peer closing its socket must never end
/// the server.
fn end_quietly_on_a_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: called before any other thread writes to a pipe; restores the default action for
    // one signal, which touches no memory of ours.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
