//! The official MCP Python SDK's client against the real broker: `Client(mode="auto")`
//! negotiates 2026-07-28 and drives the multi round-trip requests (SEP-2322) itself; the script
//! `tests/python/mrtr_client.py` gives it nothing but an elicitation callback, and the test plays
//! the browser. This is what a Python user of the broker runs, so it is checked end to end.
//!
//! The interpreter is `MCP_PYTHON`, else the venv `bash .ci/python.sh` makes under `.ci/python/`.
//! Without it the tests print `SKIPPED python: …`, unless `REQUIRE_PYTHON_MCP=1` (CI, see
//! `.ci/run`), where they fail instead.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::task::JoinHandle;

use crate::helpers::python::python;
use crate::helpers::*;
use crate::on_both_backends;

const ME: fn() -> Value = || json!({"provider": "demo", "method": "GET", "path": "/me"});

/// How long one line of the script may take: Python's start-up and imports on a busy machine,
/// or the retry's wait after the browser leg (well under the broker's 30 s `mrtr_wait`).
const LINE_WITHIN: Duration = Duration::from_secs(60);

/// The script running one tool call; killed if the test ends first.
struct PythonClient {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    /// Everything the script wrote to stderr, for the failure message.
    stderr: JoinHandle<String>,
}

impl PythonClient {
    /// Starts the script as `user` calling `tool` with `arguments`; `flags` are the script's own
    /// (`--form-answer`, `--decline-url`). The token goes through the environment, never argv.
    async fn start(python: &PathBuf, app: &TestApp, user: &str, tool: &str, arguments: Value, flags: &[&str]) -> Self {
        let token = app.token_for(user).await;
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/mrtr_client.py");
        let mut child = Command::new(python)
            .arg(script)
            .args(["--url", &app.mcp_url(), "--tool", tool, "--arguments", &arguments.to_string()])
            .args(flags)
            .env("MCP_BEARER_TOKEN", token)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|error| panic!("{} did not start: {error}", python.display()));
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut stderr = child.stderr.take().unwrap();
        // Read as it comes, so a chatty script never blocks on a full pipe.
        let stderr = tokio::spawn(async move {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text).await;
            text
        });
        Self { child, lines, stderr }
    }

    /// The next line, which must be `event` (skipping `--trace-requests` lines unless `event`
    /// is "request"); fails with the script's stderr on anything else, on the end of its
    /// output, or after [`LINE_WITHIN`].
    async fn next(&mut self, event: &str) -> Value {
        loop {
            let line = match tokio::time::timeout(LINE_WITHIN, self.lines.next_line()).await {
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None)) => self.fail(&format!("the script ended before its {event:?} line")).await,
                Ok(Err(error)) => self.fail(&format!("reading the script's output: {error}")).await,
                Err(_) => self.fail(&format!("no {event:?} line within {LINE_WITHIN:?}")).await,
            };
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                self.fail(&format!("not a JSON line: {line}")).await
            };
            if message["event"] == "request" && event != "request" {
                continue;
            }
            if message["event"] != event {
                self.fail(&format!("expected {event:?}, got {message}")).await
            }
            return message;
        }
    }

    /// Skips the requests the SDK sends until one that `fits`.
    async fn next_request_where(&mut self, fits: impl Fn(&Value) -> bool) -> Value {
        loop {
            let request = self.next("request").await;
            if fits(&request) {
                return request;
            }
        }
    }

    /// Waits for the script to exit (it must succeed, with nothing more to say).
    async fn finish(mut self) {
        if let Ok(Ok(Some(line))) = tokio::time::timeout(LINE_WITHIN, self.lines.next_line()).await {
            self.fail(&format!("a line after the result: {line}")).await
        }
        match tokio::time::timeout(LINE_WITHIN, self.child.wait()).await {
            Ok(Ok(status)) if status.success() => {}
            Ok(status) => self.fail(&format!("the script exited with {status:?}")).await,
            Err(_) => self.fail("the script did not exit").await,
        }
        // The SDK's warnings, if any, for whoever reads the test's output.
        let stderr = (&mut self.stderr).await.unwrap_or_default();
        if !stderr.trim().is_empty() {
            eprintln!("Python client's stderr:\n{stderr}");
        }
    }

    async fn fail(&mut self, what: &str) -> ! {
        let _ = self.child.kill().await;
        let stderr = tokio::time::timeout(Duration::from_secs(5), &mut self.stderr).await;
        let stderr = stderr.ok().and_then(Result::ok).unwrap_or_default();
        panic!("Python client: {what}\n--- its stderr ---\n{stderr}");
    }
}

fn text_of(result: &Value) -> String {
    result["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("\n")
}

async fn authorization_status(app: &TestApp, url: &str) -> String {
    let id = url.rsplit('/').next().unwrap();
    app.state.core.store.authorizations().by_id(id).await.unwrap().unwrap().status.as_str().to_owned()
}

/// The script's first line: the revision its `auto` mode settled on with the broker.
async fn connected_at_2026(client: &mut PythonClient) {
    let connected = client.next("connected").await;
    assert_eq!(connected["protocolVersion"], "2026-07-28", "auto mode negotiates the new revision: {connected}");
}

async fn the_python_sdk_gets_the_providers_answer_after_the_browser(app: &TestApp) {
    let Some(python) = python() else { return };
    let mut client = PythonClient::start(&python, app, ALICE, "provider_request", ME(), &[]).await;
    connected_at_2026(&mut client).await;

    // The SDK's driver hands the InputRequiredResult's link to the callback, then retries.
    let link = client.next("url").await;
    let url = link["url"].as_str().unwrap();
    assert!(url.starts_with(&app.url("/connect/")), "the broker's own page: {link}");
    assert!(link["message"].as_str().unwrap().contains("Demo Provider"), "names the provider: {link}");
    let browser = app.browser();
    assert_eq!(app.approve_in_browser(&browser, url, ALICE).await.status(), 200);

    // The retry waited for the browser and answered the provider's result: no second link
    // (`next` fails on any other line), no error, no -32042.
    let answer = client.next("result").await;
    let result = &answer["result"];
    assert_ne!(result["isError"], true, "{}", text_of(result));
    assert_eq!(result["structuredContent"]["status"], 200, "{answer}");
    assert!(!answer.to_string().contains("-32042"), "no 2025-11-25 error in this revision: {answer}");
    assert_eq!(authorization_status(app, url).await, "completed");
    client.finish().await;
}
on_both_backends!(provider_request, the_python_sdk_gets_the_providers_answer_after_the_browser);

async fn the_python_sdk_answers_the_scopes_form_then_connects(app: &TestApp) {
    let Some(python) = python() else { return };
    let chosen = json!({"scopes": ["profile", "notes:write"]}).to_string();
    let arguments = json!({"provider": "demo"});
    let flags = ["--form-answer", chosen.as_str()];
    let mut client = PythonClient::start(&python, app, ALICE, "connect_account", arguments, &flags).await;
    connected_at_2026(&mut client).await;

    // First the question, answered by the callback with the chosen scopes; then the link.
    let form = client.next("form").await;
    assert!(form["message"].as_str().unwrap().contains("Demo Provider"), "{form}");
    assert_eq!(form["requestedSchema"]["properties"]["scopes"]["type"], "array", "the scopes question: {form}");
    let link = client.next("url").await;
    let url = link["url"].as_str().unwrap();
    assert!(url.starts_with(&app.url("/connect/")), "the broker's own page: {link}");
    let browser = app.browser();
    assert_eq!(app.approve_in_browser(&browser, url, ALICE).await.status(), 200);

    let answer = client.next("result").await;
    let result = &answer["result"];
    assert_ne!(result["isError"], true, "connected: {}", text_of(result));
    let user = app.user_id(ALICE).await;
    let grants = app.state.core.store.grants().at(&user, "demo").await.unwrap();
    assert_eq!(grants.len(), 1, "one connection");
    assert_eq!(grants[0].scopes.to_space_separated(), "notes:write profile", "the scopes the user chose");
    client.finish().await;
}
on_both_backends!(scopes_form, the_python_sdk_answers_the_scopes_form_then_connects);

async fn a_decline_from_the_python_sdk_ends_the_call_and_spends_the_link(app: &TestApp) {
    let Some(python) = python() else { return };
    let mut client = PythonClient::start(&python, app, ALICE, "provider_request", ME(), &["--decline-url"]).await;
    connected_at_2026(&mut client).await;
    let link = client.next("url").await;
    let url = link["url"].as_str().unwrap().to_owned();

    // The SDK sends the decline on its retry; the broker ends the call at once.
    let answer = client.next("result").await;
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    assert!(text_of(result).contains("declined"), "says so: {answer}");
    assert_eq!(authorization_status(app, &url).await, "declined");
    let user = app.user_id(ALICE).await;
    assert!(app.state.core.store.grants().at(&user, "demo").await.unwrap().is_empty(), "nothing connected");
    client.finish().await;
}
on_both_backends!(decline, a_decline_from_the_python_sdk_ends_the_call_and_spends_the_link);

async fn the_python_sdk_retries_on_the_state_alone_while_the_user_is_slower_than_the_wait(backend: Backend) {
    let Some(python) = python() else { return };
    let options = SpawnOptions { toml: "mrtr_wait = \"300ms\"\n".into(), ..Default::default() };
    let Some(app) = spawn_app_opts(backend, options, |builder| builder).await else { return };
    let mut client = PythonClient::start(&python, &app, ALICE, "provider_request", ME(), &["--trace-requests"]).await;
    connected_at_2026(&mut client).await;
    let link = client.next("url").await;
    let url = link["url"].as_str().unwrap();

    // Nobody opened the link within `mrtr_wait`: the retry that accepted it got the state back
    // with no new link, and the SDK's driver retries with the state alone.
    let waiting = |r: &Value| r["method"] == "tools/call" && r["requestState"] == true && r["inputResponses"] == false;
    client.next_request_where(waiting).await;
    let browser = app.browser();
    assert_eq!(app.approve_in_browser(&browser, url, ALICE).await.status(), 200);

    // One of those retries gets the provider's answer; the link was asked once.
    let answer = client.next("result").await;
    assert_eq!(answer["result"]["structuredContent"]["status"], 200, "{answer}");
    client.finish().await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slower_than_the_wait_on_sqlite() {
    the_python_sdk_retries_on_the_state_alone_while_the_user_is_slower_than_the_wait(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slower_than_the_wait_on_postgres() {
    the_python_sdk_retries_on_the_state_alone_while_the_user_is_slower_than_the_wait(Backend::Postgres).await;
}
