//! An MCP 2025-11-25 session over raw HTTP ([`RawSession`]), and the SSE events of its streams
//! as sent ([`Events`]): for the tests that read ids, `retry:` and resumption themselves.

use std::time::Duration;

use serde_json::json;

pub const VERSION: &str = "2025-11-25";

/// One SSE event as sent.
#[derive(Debug)]
pub struct Event {
    pub id: Option<String>,
    pub data: String,
    pub retry: bool,
}

/// Reads SSE events from a response body.
pub struct Events {
    response: reqwest::Response,
    pending: String,
}

impl Events {
    pub fn new(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200, "an event stream");
        Self { response, pending: String::new() }
    }

    /// The next event (comments skipped), or `None` when the stream ended; fails after 20 s.
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let raw: String = self.pending.drain(..end + 2).collect();
                if raw.lines().all(|l| l.is_empty() || l.starts_with(':')) {
                    continue;
                }
                let field = |name: &str| raw.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_owned());
                return Some(Event {
                    id: field("id:"),
                    data: raw.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).collect(),
                    retry: field("retry:").is_some(),
                });
            }
            match tokio::time::timeout(Duration::from_secs(20), self.response.chunk()).await.expect("an event in time")
            {
                Ok(Some(chunk)) => self.pending.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return None,
            }
        }
    }

    /// The next event that carries a message.
    pub async fn next_message(&mut self) -> Event {
        loop {
            let event = self.next().await.expect("the stream is still open");
            if !event.data.is_empty() {
                return event;
            }
        }
    }
}

/// A session opened over plain HTTP.
pub struct RawSession {
    pub mcp_url: String,
    pub token: String,
    pub id: String,
    http: reqwest::Client,
}

impl RawSession {
    pub async fn open(mcp_url: &str, token: &str) -> Self {
        let http = reqwest::Client::new();
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": VERSION,
            "capabilities": {"elicitation": {"form": {}, "url": {}}},
            "clientInfo": {"name": "raw-sse", "version": "1"}}});
        let response = http
            .post(mcp_url)
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let id = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        let _ = response.text().await;
        let session = Self { mcp_url: mcp_url.to_owned(), token: token.to_owned(), id, http };
        let initialized = session.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        assert_eq!(initialized.status(), 202);
        session
    }

    pub async fn post(&self, body: serde_json::Value) -> reqwest::Response {
        self.http
            .post(&self.mcp_url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", VERSION)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// A request; returns the HTTP status (the body is read to its end).
    pub async fn request(&self, method: &str) -> u16 {
        let response = self.post(json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": {}})).await;
        let status = response.status().as_u16();
        let _ = response.text().await;
        status
    }

    /// The standalone stream (GET), resuming after `last_event_id` when given.
    pub async fn listen(&self, last_event_id: Option<&str>) -> reqwest::Response {
        let mut request = self
            .http
            .get(&self.mcp_url)
            .bearer_auth(&self.token)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", VERSION);
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        request.send().await.unwrap()
    }
}
