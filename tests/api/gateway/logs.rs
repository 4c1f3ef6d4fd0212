//! Gateway mode (issue 26, "Per call": "passes progress, logs and the result back"): a server
//! behind the broker sends log messages during a call; the client that made the call gets
//! those at the level it asked for (a 2025-11-25 session's `logging/setLevel`, a 2026-07-28
//! request's `_meta` logLevel, which the broker passes on to a stateless server), the logger
//! named after the server.
//!
//! Two servers, each in its own process: `examples/upstream_server.rs` (rmcp, 2025-11-25
//! sessions; its `log` tool sends on the session's stream) and `tests/python/echo_server.py`
//! (the MCP Python SDK, stateless 2026-07-28; its `chatty` tool sends on the request's stream,
//! only as far as the request's `_meta` asks).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, RequestMetaObject};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use crate::helpers::gateway::{add_provider_server, asking_server, server_saw};
use crate::helpers::python::python_server;
use crate::helpers::*;
use crate::on_both_backends;

const WAIT: Duration = Duration::from_secs(10);

/// The levels and texts of the next `count` log messages `client` received, each checked to
/// come from `logger`, sorted: rmcp hands each notification the broker's connection receives
/// to the handler on a task of its own, so messages sent back to back may pass each other.
async fn next_logs(client: &McpClient, logger: &str, count: usize) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    for _ in 0..count {
        let (level, from, data) = client.next_log(WAIT).await.expect("a log message");
        assert_eq!(from.as_deref(), Some(logger), "named after the server, then its logger");
        seen.push((level, data.as_str().unwrap_or_default().to_owned()));
    }
    seen.sort();
    seen
}

fn at(level: &str, text: &str) -> (String, String) {
    (level.to_owned(), text.to_owned())
}

#[allow(deprecated, reason = "logging/setLevel is what a 2025-11-25 session sends")]
async fn set_level(client: &McpClient, level: rmcp::model::LoggingLevel) {
    client.peer().set_level(rmcp::model::SetLevelRequestParams::new(level)).await.unwrap();
}

async fn a_sessions_servers_log_messages_reach_a_2025_session_at_the_level_it_set(app: &TestApp) {
    // Arrange
    let upstream = asking_server(app).await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    #[allow(deprecated, reason = "logging/setLevel's levels")]
    set_level(&client, rmcp::model::LoggingLevel::Info).await;

    // Act
    let logged = client.call("crm_log", json!({})).await.unwrap();

    // Assert: the messages from info up, the debug one left out (it was sent first).
    assert_eq!(server_saw(&logged)["logged"], 3);
    assert_eq!(next_logs(&client, "crm/worker", 2).await, [at("info", "working"), at("warning", "careful")]);
    client.close().await;
    upstream.stop().await;
}
on_both_backends!(session_server_2025, a_sessions_servers_log_messages_reach_a_2025_session_at_the_level_it_set);

/// `pyecho_chatty` with `tag`, with `_meta` logLevel `level` (none: no key); its answer.
#[allow(deprecated, reason = "the 2026-07-28 logLevel takes rmcp's logging level")]
async fn chatty_2026(client: &McpClient, tag: &str, level: Option<rmcp::model::LoggingLevel>) -> Value {
    let mut options = PeerRequestOptions::no_options();
    if let Some(level) = level {
        let mut meta = RequestMetaObject::new();
        meta.set_log_level(level);
        options.meta = Some(meta);
    }
    let mut params = CallToolRequestParams::new("pyecho_chatty");
    params.arguments = json!({"tag": tag}).as_object().cloned();
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = client.peer().send_request_with_option(request, options).await.unwrap();
    serde_json::to_value(handle.await_response().await.unwrap()).unwrap()
}

/// `name`'s client (of 2026-07-28 or of 2025-11-25) that has connected the Python server
/// (`pyecho`, provider auth) through the broker's link in its era.
async fn connected(app: &TestApp, name: &str, era_2026: bool) -> Arc<McpClient> {
    if era_2026 {
        crate::helpers::gateway::connected_2026(app, "pyecho_connect", name, "alice-demo").await
    } else {
        Arc::new(crate::helpers::gateway::connected_2025(app, "pyecho", name, "alice-demo").await)
    }
}

#[allow(deprecated, reason = "the 2026-07-28 logLevel takes rmcp's logging level")]
async fn a_stateless_servers_log_messages_reach_a_2026_request_at_the_level_in_its_meta(app: &TestApp) {
    // Arrange
    let Some(upstream) = python_server(app).await else { return };
    add_provider_server(app, "pyecho", &upstream).await;
    let client = connected(app, ALICE, true).await;

    // Act: a request that names no level, then one that asks for warnings.
    let first = chatty_2026(&client, "first", None).await;
    let second = chatty_2026(&client, "second", Some(rmcp::model::LoggingLevel::Warning)).await;

    // Assert: both ran; the server was asked for warnings on the second only (the broker passed
    // the level on), and its warning reached the client before anything of the first call's.
    assert_eq!(first["structuredContent"]["logged"], 3, "{first}");
    assert_eq!(second["structuredContent"]["logged"], 3, "{second}");
    assert_eq!(next_logs(&client, "pyecho/worker", 1).await, [at("warning", "second: careful")]);
    upstream.stop().await;
}
on_both_backends!(
    stateless_server_2026,
    a_stateless_servers_log_messages_reach_a_2026_request_at_the_level_in_its_meta
);

#[allow(deprecated, reason = "logging/setLevel's levels")]
async fn a_stateless_servers_log_messages_reach_a_2025_session_at_the_level_it_set(app: &TestApp) {
    // Arrange
    let Some(upstream) = python_server(app).await else { return };
    add_provider_server(app, "pyecho", &upstream).await;
    let client = connected(app, ALICE, false).await;
    set_level(&client, rmcp::model::LoggingLevel::Info).await;

    // Act
    let logged = client.call("pyecho_chatty", json!({"tag": "s"})).await.unwrap();

    // Assert: the session's level went to the server as the request's logLevel; the messages
    // from info up came back.
    assert_eq!(logged.structured_content.clone().unwrap()["logged"], 3, "{logged:?}");
    assert_eq!(next_logs(&client, "pyecho/worker", 2).await, [at("info", "s: working"), at("warning", "s: careful")]);
    upstream.stop().await;
}
on_both_backends!(stateless_server_2025, a_stateless_servers_log_messages_reach_a_2025_session_at_the_level_it_set);
