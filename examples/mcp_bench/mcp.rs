//! MCP over plain HTTP, as the load generator sees it: sessions opened and called by hand, so
//! wrk can replay the same requests.

use anyhow::{Context, bail};
use serde_json::{Value, json};

pub const PROTOCOL: &str = "2025-11-25";
const ACCEPT: &str = "application/json, text/event-stream";

/// One MCP server and the bearer token to use on it (none for the echo server).
#[derive(Clone)]
pub struct Endpoint {
    pub http: reqwest::Client,
    pub mcp: String,
    pub token: Option<String>,
}

impl Endpoint {
    fn post(&self, session: Option<&str>, body: &Value) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(&self.mcp)
            .header("accept", ACCEPT)
            .header("content-type", "application/json")
            .header("mcp-protocol-version", PROTOCOL)
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        request
    }

    /// `initialize` and `notifications/initialized`; the new session's id.
    pub async fn open_session(&self) -> anyhow::Result<String> {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "mcp-bench", "version": "1"}}});
        let response = self.post(None, &init).send().await?;
        if !response.status().is_success() {
            bail!("initialize: HTTP {}", response.status());
        }
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .context("initialize: no session id")?
            .to_owned();
        answer(&response.text().await?)?;
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let response = self.post(Some(&session), &initialized).send().await?;
        if !response.status().is_success() {
            bail!("notifications/initialized: HTTP {}", response.status());
        }
        Ok(session)
    }

    /// One `tools/call`; the JSON-RPC result, or an error for a JSON-RPC error or an
    /// `isError` result (a fast error would flatter the numbers).
    pub async fn call(&self, session: &str, tool: &str, arguments: &Value) -> anyhow::Result<Value> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        let response = self.post(Some(session), &body).send().await?;
        if !response.status().is_success() {
            bail!("{tool}: HTTP {}", response.status());
        }
        let result = answer(&response.text().await?)?;
        if result.get("isError") == Some(&Value::Bool(true)) {
            bail!("{tool}: isError result {result}");
        }
        Ok(result)
    }

    /// Opens the session's standalone GET stream and keeps it open (the response is not read).
    pub async fn listen(&self, streams: &reqwest::Client, session: &str) -> anyhow::Result<reqwest::Response> {
        let mut request = streams
            .get(&self.mcp)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", PROTOCOL)
            .header("mcp-session-id", session);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await?;
        if !response.status().is_success() {
            bail!("GET stream: HTTP {}", response.status());
        }
        Ok(response)
    }

    /// `DELETE` the session (MCP transports §Session management).
    pub async fn close(&self, session: &str) -> anyhow::Result<()> {
        let mut request =
            self.http.delete(&self.mcp).header("mcp-protocol-version", PROTOCOL).header("mcp-session-id", session);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await?;
        if !response.status().is_success() {
            bail!("DELETE session: HTTP {}", response.status());
        }
        Ok(())
    }
}

/// The JSON-RPC answer in a POST response (JSON, or the SSE event that carries it).
fn answer(body: &str) -> anyhow::Result<Value> {
    let messages: Vec<Value> = if body.trim_start().starts_with('{') {
        vec![serde_json::from_str(body)?]
    } else {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    };
    for message in messages {
        if let Some(error) = message.get("error") {
            bail!("JSON-RPC error {error}");
        }
        if let Some(result) = message.get("result") {
            return Ok(result.clone());
        }
    }
    bail!("no JSON-RPC answer in the response")
}
