//! Servers behind the broker: `examples/upstream_server.rs` in its own process ([`Upstream`]),
//! registered with `admin servers` as an operator does; a user's client that has connected one,
//! in either protocol era; the (client, server) pairs a user approves and withdraws; and clients
//! that count the list changes they are told of.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{CallToolResult, ClientConfig, Implementation};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use super::token_api::url_elicitation_required;
use super::{ALICE, ClientKind, McpClient, TestApp, eventually, hidden_field, hidden_fields};

/// `examples/upstream_server.rs`, running.
pub struct Upstream {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    pub mcp_url: String,
}

impl Upstream {
    /// Checks every request's bearer token at the demo provider of `app`.
    pub async fn bearer(app: &TestApp) -> Self {
        Self::start(&["--require-bearer", &app.url("/demo-provider")], None).await
    }

    pub async fn start(args: &[&str], secret: Option<&str>) -> Self {
        let binary = crate::helpers::cli::example_binary("upstream_server");
        let mut command = tokio::process::Command::new(&binary);
        if !args.contains(&"--listen") {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        command.args(args).env("RUST_LOG", "warn");
        if let Some(secret) = secret {
            command.env("UPSTREAM_SECRET", secret);
        }
        Self::spawn(command).await
    }

    /// Runs `command`, a server that prints `listening on http://ADDR` first and serves `/mcp`.
    pub async fn spawn(mut command: tokio::process::Command) -> Self {
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {:?}: {e}", command.as_std().get_program()));
        let stdout = child.stdout.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the upstream server prints its address")
            .unwrap()
            .expect("a first line");
        let base = first.strip_prefix("listening on ").expect("`listening on http://ADDR`").to_owned();
        Self { child, lines, mcp_url: format!("{base}/mcp") }
    }

    /// Waits for the server to print `line` (it says when a `slow` call started).
    pub async fn printed(&mut self, line: &str) {
        loop {
            let next = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line()).await;
            match next.expect("the upstream server printed it").unwrap() {
                Some(printed) if printed == line => return,
                Some(_) => continue,
                None => panic!("the upstream server ended before printing {line:?}"),
            }
        }
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// `admin servers …` as the operator runs it, with `stdin` fed to the command.
pub async fn servers_cli(app: &TestApp, args: &[&str], stdin: Option<&str>) -> std::process::Output {
    let mut command = crate::helpers::cli::broker_for(app);
    command.arg("admin").arg("servers").args(args);
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).await.unwrap();
    }
    drop(input);
    child.wait_with_output().await.unwrap()
}

pub async fn servers_ok(app: &TestApp, args: &[&str]) -> String {
    let output = servers_cli(app, args, None).await;
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Registers `upstream` as `name` with the user's demo token (scope `profile`), and waits
/// until this app serves it.
pub async fn add_provider_server(app: &TestApp, name: &str, upstream: &Upstream) {
    servers_ok(
        app,
        &["add", name, "--url", &upstream.mcp_url, "--auth", "provider", "--provider", "demo", "--scopes", "profile"],
    )
    .await;
    let prefix = format!("{}_", name.replace('-', "_"));
    eventually("the broker serves the new server", Duration::from_secs(10), || async {
        app.state.core.store.gateway_servers().by_name(name).await.unwrap().is_some() && served(app, &prefix).await
    })
    .await;
}

/// Whether this app lists a tool starting with `prefix` (asked as a fresh client would).
pub async fn served(app: &TestApp, prefix: &str) -> bool {
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let names = tool_names(&client).await;
    client.close().await;
    names.iter().any(|n| n.starts_with(prefix))
}

pub async fn tool_names(client: &McpClient) -> Vec<String> {
    client.peer().list_all_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect()
}

/// `client` (URL mode, 2025-11-25) connects the server through its connect tool as `name`,
/// approving at the demo provider as `account`.
pub async fn connect_through_link(app: &TestApp, client: &McpClient, tool: &str, name: &str, account: &str) {
    let (_, url) = url_elicitation_required(client.call(tool, json!({})).await);
    assert!(url.starts_with(&app.url("/connect/")), "the broker's own page: {url}");
    let browser = app.browser();
    assert_eq!(app.approve_in_browser_as(&browser, &url, name, account).await.status(), 200);
}

/// A client without URL mode was told the broker's link as text (the first call to a server
/// whose pair the user has not approved): `name` approves the pair there.
pub async fn approve_pair_from_text(app: &TestApp, result: &rmcp::model::CallToolResult, name: &str) {
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let text = serde_json::to_string(&result.content).unwrap();
    let start = text.find(&app.url("/connect/")).expect("the broker's link in the text");
    let url: String = text[start..].chars().take_while(|c| !c.is_whitespace() && *c != '"').collect();
    app.allow_in_browser(&app.browser(), &url, name).await;
}

pub fn account_of(result: &rmcp::model::CallToolResult) -> String {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    result.structured_content.as_ref().unwrap()["account"].as_str().unwrap_or_default().to_owned()
}

/// The user's `/connections` page in `browser` (signed in already).
pub async fn connections_page(app: &TestApp, browser: &reqwest::Client) -> String {
    let page = browser.get(app.url("/connections")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    page.text().await.unwrap()
}

/// The (server, client) pair of the first approval the connections page lists, as its withdraw
/// form carries it.
pub(crate) fn listed_approval(page: &str) -> (String, String) {
    let form = page.find("/connections/servers/withdraw").expect("an approval is listed");
    let fields = hidden_fields(&page[form..]);
    let value = |name: &str| fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).unwrap();
    (value("server_id"), value("client_key"))
}

/// Posts the withdraw form of `approval` from `browser`'s signed-in session; the answer's status.
pub(crate) async fn post_withdraw(
    app: &TestApp,
    browser: &reqwest::Client,
    csrf: &str,
    (server_id, client_key): &(String, String),
) -> u16 {
    let form = [("csrf_token", csrf), ("server_id", server_id.as_str()), ("client_key", client_key.as_str())];
    let answer = browser.post(app.url("/connections/servers/withdraw")).form(&form).send().await.unwrap();
    answer.status().as_u16()
}

/// `user` withdraws the first (client, server) approval listed on `app`'s connections page.
pub(crate) async fn withdraw_on_connections_page(app: &TestApp, user: &str) {
    let browser = app.browser();
    assert_eq!(app.sign_in(&browser, user, "/connections").await.status(), 303);
    let page = connections_page(app, &browser).await;
    let csrf = hidden_field(&page, "csrf_token").unwrap();
    assert_eq!(post_withdraw(app, &browser, &csrf, &listed_approval(&page)).await, 303);
}

/// A client that counts the list-changed notifications it hears.
#[derive(Clone, Default)]
pub(crate) struct ListChangeCounter {
    pub(crate) tools: Arc<AtomicUsize>,
    pub(crate) prompts: Arc<AtomicUsize>,
    pub(crate) resources: Arc<AtomicUsize>,
}

impl ClientHandler for ListChangeCounter {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools.fetch_add(1, Ordering::SeqCst);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.prompts.fetch_add(1, Ordering::SeqCst);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.resources.fetch_add(1, Ordering::SeqCst);
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.client_info = Implementation::new("counting", "1");
        info
    }
}

/// An open server (no credential) registered as `crm`; its tools are listed as `crm_…`.
pub async fn asking_server(app: &TestApp) -> Upstream {
    let upstream = Upstream::start(&[], None).await;
    servers_ok(app, &["add", "crm", "--url", &upstream.mcp_url, "--auth", "none"]).await;
    eventually("the server's tools are listed", Duration::from_secs(10), || served(app, "crm_ask_name")).await;
    approve_pair(app, ALICE).await;
    upstream
}

/// `name` allows their client (the same token client as the tests' clients) to call `crm`:
/// the first call answers with the broker's link as text; the pages approve the pair.
pub async fn approve_pair(app: &TestApp, name: &str) {
    let client = app.mcp_client(name, ClientKind::NoElicitation).await;
    let first = client.call("crm_ask_name", json!({})).await.unwrap();
    approve_pair_from_text(app, &first, name).await;
    client.close().await;
}

/// What the server answered: what the user did, or the error it got instead.
pub fn server_saw(result: &CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    result.structured_content.clone().expect("the server's structured answer")
}

/// A client that counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
pub(crate) struct ToolListChangeCounter(pub(crate) Arc<AtomicUsize>);

impl ClientHandler for ToolListChangeCounter {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.client_info = Implementation::new("counting", "1");
        info
    }
}

/// A 2025-11-25 session of `name` that has connected `server` (approved at the demo provider
/// as `account`).
pub(crate) async fn connected_2025(app: &TestApp, server: &str, name: &str, account: &str) -> McpClient {
    let client = app.mcp_client(name, ClientKind::Url).await;
    let connect = format!("{server}_connect");
    connect_through_link(app, &client, &connect, name, account).await;
    let connected = client.call(&connect, json!({})).await.unwrap();
    assert_ne!(connected.is_error, Some(true), "{connected:?}");
    client
}

/// A 2026-07-28 client of `name` that has connected through the broker's round trip, calling
/// `tool` (the server's connect tool while its tools are unknown, else one of them).
pub(crate) async fn connected_2026(app: &TestApp, tool: &str, name: &str, account: &str) -> Arc<McpClient> {
    let client = Arc::new(app.mcp_client_2026(name, ClientKind::Url).await);
    let connect = tool.to_owned();
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.call(&connect, json!({})).await }
    });
    let (url, _) = client.next_url_elicitation().await;
    assert_eq!(app.approve_in_browser_as(&app.browser(), &url, name, account).await.status(), 200);
    let connected = call.await.unwrap().expect("the server's answer after the browser");
    assert_ne!(connected.is_error, Some(true), "{connected:?}");
    client
}
