//! A small interactive MCP client for trying the broker's connect flow by hand.
//!
//! `OAUTH_BROKER_TOKEN=<token> cargo run --example demo_client -- --url http://127.0.0.1:8080/mcp`
//!
//! The token comes from the environment, not the command line, where any local user could
//! read it (`ps`).
//!
//! It declares URL-mode elicitation (MCP 2025-11-25 client/elicitation §URL mode), lists the
//! user's connections, then calls `provider_request GET <path>`. If the account is not connected
//! yet, or only this client has not been approved to use it, the broker answers `-32042` with a
//! link and a message saying which; we print both, wait for `notifications/elicitation/complete`
//! (or Enter), and retry once the browser part is done.

use std::time::Duration;

use clap::Parser;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, CustomNotification, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationCapability, ErrorData, Implementation, UrlElicitationCapability,
};
use rmcp::service::{ClientInitializeError, NotificationContext, RequestContext, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{StreamableHttpClientTransportConfig, StreamableHttpError};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// MCP's URLElicitationRequiredError.
const URL_ELICITATION_REQUIRED: i32 = -32042;
/// The broker keeps a connect link open for longer than this; waiting past it helps nobody.
const BROWSER_WAIT: Duration = Duration::from_secs(10 * 60);
const DOT_EVERY: Duration = Duration::from_secs(3);
/// Tokens name the broker's public URL, so a new one must be issued with the server's own settings.
const TOKEN_REFUSED: &str = "the token was refused (expired, or issued by another broker): issue a new one with \
    `oauth-broker admin tokens issue demo --client demo_client` (the same --client keeps this client's approvals), \
    passing the same --data-dir/--listen as `serve`, and give it in OAUTH_BROKER_TOKEN";

// No `Debug` derive: the token must not be printable by accident.
#[derive(Parser)]
#[command(about = "Try the oauth-broker connect flow from a terminal")]
struct Args {
    /// The broker's MCP endpoint.
    #[arg(long, default_value = "http://127.0.0.1:8080/mcp")]
    url: String,
    /// Bearer token (printed by `oauth-broker serve --demo`). Prefer the environment variable:
    /// a command-line argument is visible to every local user in `ps`.
    #[arg(long, env = "OAUTH_BROKER_TOKEN", hide_env_values = true)]
    token: String,
    /// Provider id to call.
    #[arg(long, default_value = "demo")]
    provider: String,
    /// API path at the provider.
    #[arg(long, default_value = "/me")]
    path: String,
}

/// Sends the id of each finished link (`notifications/elicitation/complete`) to the main task.
struct DemoClient(mpsc::UnboundedSender<String>);

impl ClientHandler for DemoClient {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        // Without `url` the broker falls back to a text answer, and there would be nothing to show.
        capabilities.elicitation = Some(ElicitationCapability::new().with_url(UrlElicitationCapability::default()));
        ClientConfig::new(capabilities, Implementation::new("oauth-broker-demo-client", env!("CARGO_PKG_VERSION")))
    }

    // MCP 2025-11-25 client/elicitation §URL mode: accepting means "I showed the user the link";
    // the outcome arrives later as a notification.
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        match request {
            // Printed here because the call that caused it (`connect_account`) waits server-side.
            ElicitRequestParams::UrlElicitationParams { url, message, .. } => {
                show_link(&url, Some(&message));
                Ok(ElicitResult::new(ElicitationAction::Accept))
            }
            // We declared URL mode only, so a form request is a server bug; say no rather than guess.
            _ => Ok(ElicitResult::new(ElicitationAction::Decline)),
        }
    }

    async fn on_custom_notification(&self, notification: CustomNotification, _ctx: NotificationContext<RoleClient>) {
        if notification.method == "notifications/elicitation/complete"
            && let Some(id) = notification.params.as_ref().and_then(|p| p["elicitationId"].as_str())
        {
            let _ = self.0.send(id.to_owned());
        }
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Err(message) = run(args).await {
        eprintln!("error: {message}");
        std::process::exit(1);
    }
}

async fn run(args: Args) -> Result<(), String> {
    let (completed_tx, mut completed) = mpsc::unbounded_channel();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(args.url.as_str()).auth_header(args.token),
    );
    let client = DemoClient(completed_tx).serve(transport).await.map_err(|e| {
        if e.auth_challenge().is_some() {
            TOKEN_REFUSED.to_owned()
        } else {
            // rmcp does not chain the transport error as a `source`; unwrap it by hand.
            let cause = match &e {
                ClientInitializeError::TransportError { error, .. } => root_cause(error.error.as_ref()),
                other => root_cause(other),
            };
            format!(
                "could not start an MCP session at {}: {cause}\n(is `oauth-broker serve --demo` running?)",
                args.url
            )
        }
    })?;
    println!("Connected to {}", args.url);

    let Outcome::Done(connections) = call(&client, "list_connections", json!({})).await? else {
        return Err("list_connections asked for a browser step, which it never should".to_owned());
    };
    print_connections(&connections);

    // A thread, not tokio's stdin: its blocking read cannot be cancelled and would hang shutdown.
    let (enter_tx, mut enter) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
            line.clear();
            if enter_tx.send(()).is_err() {
                break;
            }
        }
    });

    let request = json!({"provider": args.provider, "method": "GET", "path": args.path});
    println!("\nCalling provider_request GET {} at {} …", args.path, args.provider);
    // Repeats only on a user's Enter or the broker's word, so it cannot spin on its own.
    let mut shown: Option<String> = None;
    loop {
        let (url, id, message) = match call(&client, "provider_request", request.clone()).await? {
            Outcome::Done(result) => {
                print_response(&result);
                return Ok(());
            }
            Outcome::NeedsBrowser { url, id, message } => (url, id, message),
        };
        // The broker reuses an open link, so a second banner would only bury the first.
        if shown.as_deref() == Some(url.as_str()) {
            println!("  Not approved yet; the link above still works.");
        } else {
            show_link(&url, message.as_deref());
        }
        shown = Some(url);
        match wait_for_browser(&id, &mut completed, &mut enter).await {
            Wake::Completed | Wake::Enter => println!("Retrying …"),
            Wake::TimedOut => {
                return Err(format!(
                    "nothing happened for {} minutes; run this again when ready",
                    BROWSER_WAIT.as_secs() / 60
                ));
            }
            Wake::Closed => return Err("the session with the broker ended (was the server stopped?)".to_owned()),
        }
    }
}

/// A tool's answer, or the link the user must open first (`-32042`) with the broker's message:
/// "Connect your … account" for a first connection, "Allow this client to use your existing …
/// connection" when only this client's approval is missing.
enum Outcome {
    Done(CallToolResult),
    NeedsBrowser { url: String, id: String, message: Option<String> },
}

async fn call(
    client: &rmcp::service::RunningService<RoleClient, DemoClient>,
    name: &str,
    arguments: Value,
) -> Result<Outcome, String> {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = arguments.as_object().cloned();
    match client.peer().call_tool(params).await {
        Ok(result) => Ok(Outcome::Done(result)),
        Err(ServiceError::McpError(e)) if e.code.0 == URL_ELICITATION_REQUIRED => {
            let first = e.data.as_ref().map(|d| &d["elicitations"][0]);
            match first.and_then(|f| Some((f["url"].as_str()?, f["elicitationId"].as_str()?))) {
                Some((url, id)) => Ok(Outcome::NeedsBrowser {
                    url: url.to_owned(),
                    id: id.to_owned(),
                    message: first.and_then(|f| f["message"].as_str()).map(str::to_owned),
                }),
                None => Err(format!("{name}: -32042 without a link: {}", e.message)),
            }
        }
        Err(e) if e.auth_challenge().is_some() => Err(TOKEN_REFUSED.to_owned()),
        Err(ServiceError::McpError(e)) => Err(format!("{name} failed: {} ({})", e.message, e.code.0)),
        Err(e) => Err(format!("{name} failed: {}", root_cause(&e))),
    }
}

/// The innermost cause ("Connection refused"), not rmcp's wrapper chain with Rust type names.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    loop {
        // rmcp's `Client(reqwest::Error)` variant is not a `source` either.
        if let Some(StreamableHttpError::Client(inner)) = current.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            current = inner;
        } else if let Some(source) = current.source() {
            current = source;
        } else {
            return current.to_string();
        }
    }
}

/// The broker's own words say what the link is for (connect the account, or only approve this
/// client); the fallback covers both.
fn show_link(url: &str, message: Option<&str>) {
    let why = message.unwrap_or("The broker needs you to connect your account or approve this client.");
    println!("\n  {why}\n\n  Open this link in your browser:\n\n      {url}\n");
    println!("  Sign in, approve, and this client carries on by itself (or press Enter to retry now).");
}

enum Wake {
    Completed,
    Enter,
    TimedOut,
    Closed,
}

/// Returns when the broker says this link is finished, the user presses Enter, or we give up.
async fn wait_for_browser(
    id: &str,
    completed: &mut mpsc::UnboundedReceiver<String>,
    enter: &mut mpsc::UnboundedReceiver<()>,
) -> Wake {
    use std::io::Write;
    let deadline = tokio::time::sleep(BROWSER_WAIT);
    tokio::pin!(deadline);
    let mut dots = tokio::time::interval_at(tokio::time::Instant::now() + DOT_EVERY, DOT_EVERY);
    print!("  Waiting");
    let wake = loop {
        let _ = std::io::stdout().flush();
        tokio::select! {
            done = completed.recv() => match done {
                Some(done) if done == id => break Wake::Completed,
                // An older link's completion is no reason to retry this one.
                Some(_) => {}
                None => break Wake::Closed,
            },
            Some(()) = enter.recv() => break Wake::Enter,
            _ = dots.tick() => print!("."),
            _ = &mut deadline => break Wake::TimedOut,
        }
    };
    println!("{}", if matches!(wake, Wake::Completed) { " done." } else { "" });
    wake
}

fn print_connections(result: &CallToolResult) {
    let Some(list) = result.structured_content.as_ref().and_then(|s| s["connections"].as_array()) else {
        return println!("Connections: {}", text_of(result));
    };
    println!("Connections:");
    for c in list {
        let account = c["account"].as_str().map(|a| format!(" as {a}")).unwrap_or_default();
        println!("  {:<12} {}{account}", c["provider"].as_str().unwrap_or("?"), c["status"].as_str().unwrap_or("?"));
    }
}

fn print_response(result: &CallToolResult) {
    let Some(response) = &result.structured_content else {
        // Refusals before any upstream call (bad path, unknown provider) come back as text.
        return println!("The broker refused the call: {}", text_of(result));
    };
    println!("\nHTTP {}", response["status"]);
    match &response["body"] {
        Value::Null => println!("(empty body)"),
        body => println!("{}", serde_json::to_string_pretty(body).unwrap_or_default()),
    }
}

fn text_of(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n")
}
