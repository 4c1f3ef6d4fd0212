//! Services of the token API: registered as `admin services add` does, a user's token meant for
//! one, the example tool server (`examples/tool_server.rs`) in its own process, and the
//! requests and answers of the API's limits.

use std::collections::BTreeSet;
use std::time::Duration;

use oauth_broker::crypto::OneTimeSecret;
use oauth_broker::domain::{OrganizationId, ProviderId};
use oauth_broker::store::token_api::NewService;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use super::cli::example_binary;
use super::{ALICE, Backend, SpawnOptions, TestApp, spawn_app_opts};

/// A service's credentials, as `admin services add` prints them.
#[derive(Clone)]
pub struct ServiceCredentials {
    pub client_id: String,
    pub secret: String,
    pub resource: Option<String>,
}

/// How a test registers a service.
#[derive(Clone, Copy, Default)]
pub struct ServiceOptions<'a> {
    pub resource: Option<&'a str>,
    pub proxy_only: bool,
    pub trusted: bool,
    /// The organization it belongs to (default: the default organization).
    pub org: Option<&'a OrganizationId>,
}

/// Registers a service for `providers` (what `admin services add` does, on the app's database).
pub async fn register_service(
    app: &TestApp,
    name: &str,
    providers: &[&str],
    options: ServiceOptions<'_>,
) -> ServiceCredentials {
    let secret = OneTimeSecret::generate("obs_", 32);
    register_service_with(app, name, providers, options, &secret).await;
    ServiceCredentials {
        client_id: format!("svc_{name}"),
        secret: secret.expose_plaintext().to_owned(),
        resource: options.resource.map(str::to_owned),
    }
}

pub async fn register_service_with(
    app: &TestApp,
    name: &str,
    providers: &[&str],
    options: ServiceOptions<'_>,
    secret: &OneTimeSecret,
) {
    let providers: BTreeSet<ProviderId> = providers.iter().map(|p| ProviderId::parse(p).unwrap()).collect();
    let resource = options.resource.map(|r| url::Url::parse(r).unwrap());
    let default = OrganizationId::default_organization();
    let new = NewService {
        name,
        providers: &providers,
        resource: resource.as_ref(),
        proxy_only: options.proxy_only,
        trusted: options.trusted,
        secret_hash: secret.hash(),
        organization: options.org.unwrap_or(&default),
    };
    app.state.core.store.services().create(&new, app.now()).await.unwrap();
}

/// A user's access token meant for `audience` (what `admin tokens issue NAME --service S` prints).
pub async fn user_token_for(app: &TestApp, name: &str, audience: &str) -> String {
    let user = app.state.core.store.users().by_username(name).await.unwrap().unwrap();
    app.state.identity.keys.issue_for_audience(&user.subject, Some(name), None, audience, app.now(), 3600).unwrap()
}

/// The example tool server, as its own process.
pub struct ToolServer {
    child: tokio::process::Child,
    /// `http://127.0.0.1:PORT/mcp`
    pub mcp_url: String,
}

impl ToolServer {
    /// Starts `examples/tool_server.rs` (built by `cargo test`, like every example) against the
    /// broker, with a service secret, in `mode` (`exchange` or `proxy`).
    pub async fn start(app: &TestApp, client_id: &str, secret: &str, mode: &str) -> Self {
        Self::start_with(app, client_id, secret, mode, &[]).await
    }

    /// [`Self::start`] with `extra` command-line arguments.
    pub async fn start_with(app: &TestApp, client_id: &str, secret: &str, mode: &str, extra: &[&str]) -> Self {
        let binary = example_binary("tool_server");
        let mut child = tokio::process::Command::new(&binary)
            .args(["--listen", "127.0.0.1:0", "--broker", &app.address, "--client-id", client_id, "--mode", mode])
            .args(extra)
            .env("TOOL_SERVER_CLIENT_SECRET", secret)
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let stdout = child.stdout.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the tool server prints its address")
            .unwrap()
            .expect("a first line");
        let base = first.strip_prefix("listening on ").expect("`listening on http://ADDR`").to_owned();
        Self { child, mcp_url: format!("{base}/mcp") }
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// The `-32042` a tool answered: (elicitationId, url).
pub fn url_elicitation_required(result: Result<rmcp::model::CallToolResult, rmcp::ServiceError>) -> (String, String) {
    match result {
        Err(rmcp::ServiceError::McpError(error)) => {
            assert_eq!(error.code.0, -32042, "{error:?}");
            let data = error.data.expect("elicitations in data");
            let elicitation = &data["elicitations"][0];
            assert_eq!(elicitation["mode"], "url");
            (elicitation["elicitationId"].as_str().unwrap().to_owned(), elicitation["url"].as_str().unwrap().to_owned())
        }
        other => panic!("expected -32042, got {other:?}"),
    }
}

pub const RESOURCE: &str = "https://tools.example/mcp";

pub async fn app_with(backend: Backend, toml: &str) -> Option<TestApp> {
    let options = SpawnOptions { toml: toml.to_owned(), ..Default::default() };
    spawn_app_opts(backend, options, |builder| builder).await
}

/// One token-API answer: status, `Retry-After`, content type and body.
pub struct Answer {
    pub status: StatusCode,
    pub retry_after: Option<u64>,
    pub content_type: String,
    pub body: Value,
}

pub async fn answer(response: reqwest::Response) -> Answer {
    let status = response.status();
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let retry_after = header("retry-after").and_then(|v| v.parse().ok());
    let content_type = header("content-type").unwrap_or_default();
    Answer { status, retry_after, content_type, body: response.json().await.unwrap_or(Value::Null) }
}

/// `GET /v1/authorizations/{id}?wait=N` at `base` as `service`.
pub async fn poll(base: &str, service: &ServiceCredentials, id: &str, wait: u64) -> Answer {
    poll_with(&reqwest::Client::new(), base, service, id, wait).await
}

/// [`poll`] over `client`'s kept-alive connections (a test that polls in a loop: a new client
/// per request builds its TLS settings each time).
pub async fn poll_with(
    client: &reqwest::Client,
    base: &str,
    service: &ServiceCredentials,
    id: &str,
    wait: u64,
) -> Answer {
    let response = client
        .get(format!("{base}/v1/authorizations/{id}?wait={wait}"))
        .basic_auth(&service.client_id, Some(&service.secret))
        .send()
        .await
        .unwrap();
    answer(response).await
}

/// A pending authorization caused by `service` (for ALICE, who has not connected `demo`).
pub async fn pending_authorization(app: &TestApp, service: &ServiceCredentials) -> String {
    let token = user_token_for(app, ALICE, RESOURCE).await;
    let response = app
        .http()
        .post(app.url("/v1/tokens"))
        .basic_auth(&service.client_id, Some(&service.secret))
        .json(&json!({"subject_token": token, "provider": "demo"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);
    let body: Value = response.json().await.unwrap();
    body["authorization"]["id"].as_str().unwrap().to_owned()
}

pub async fn notes_service(app: &TestApp, name: &str) -> ServiceCredentials {
    register_service(app, name, &["demo"], ServiceOptions { resource: Some(RESOURCE), ..Default::default() }).await
}

pub fn assert_rate_limited(answer: &Answer, limit: &str, retry_after: u64) {
    assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS, "{}", answer.body);
    assert_eq!(answer.content_type, "application/problem+json");
    assert_eq!(answer.body["type"], "urn:oauth-broker:problem:rate_limited");
    assert_eq!(answer.body["code"], "rate_limited");
    assert_eq!(answer.body["limit"], limit);
    assert_eq!(answer.retry_after, Some(retry_after), "Retry-After");
    assert_eq!(answer.body["retry_after"], retry_after);
}

/// Waits (bounded) until the service's live wait slots are `count`.
pub async fn slots_become(app: &TestApp, service: &ServiceCredentials, count: i64) {
    // A closed stream is noticed at the latest at its next keep-alive (15 s).
    crate::helpers::eventually(&format!("{count} wait slot(s) live"), Duration::from_secs(40), || async {
        let live = app.state.core.store.api_limits().wait_slots_live(&service.client_id, app.now()).await.unwrap();
        if live == count { Ok(()) } else { Err(format!("{live} live")) }
    })
    .await;
}
