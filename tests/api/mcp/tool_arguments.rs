//! Tool arguments are checked against the schema each tool advertises, the broker's own tools
//! and an extension's alike: a call outside it is refused with `-32602` naming the argument, and
//! nothing runs.

use std::sync::Arc;

use rmcp::model::CallToolResult;
use serde_json::json;

use crate::helpers::{ALICE, ClientKind, refusal};

/// An extension tool with a schema of its own.
struct Counter;

impl oauth_broker::mcp::extension::Extension for Counter {
    fn tools(&self) -> Vec<rmcp::model::Tool> {
        let schema = json!({"type": "object", "properties": {"count": {"type": "integer", "maximum": 5}},
                            "required": ["count"], "additionalProperties": false});
        vec![rmcp::model::Tool::new("count_to", "Counts.", Arc::new(schema.as_object().cloned().unwrap()))]
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Option<rmcp::model::JsonObject>,
        _ctx: oauth_broker::mcp::extension::ExtensionContext,
    ) -> oauth_broker::mcp::extension::ExtensionFuture<'a, rmcp::model::CallToolResponse> {
        Box::pin(async move {
            (name == "count_to").then(|| {
                let count = arguments.unwrap_or_default()["count"].as_i64().unwrap_or(-1);
                Ok(CallToolResult::success(vec![rmcp::model::ContentBlock::text(format!("counted to {count}"))]).into())
            })
        })
    }
}

async fn tool_arguments_are_checked_against_the_advertised_schema(backend: crate::helpers::Backend) {
    let Some(app) = crate::helpers::spawn_app_with(backend, |builder| builder.extension(Counter)).await else {
        return;
    };
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let cases = [
        (
            "connect_account",
            json!({"provider": "demo", "account": "a".repeat(1000)}),
            "account: longer than 128 characters",
        ),
        ("connect_account", json!({"provider": "demo", "scopes": "profile"}), "scopes: must be of type array"),
        ("connect_account", json!({"account": "work"}), "provider: required"),
        ("disconnect_account", json!({"provider": "nope"}), "provider: must be one of: demo"),
        (
            "provider_request",
            json!({"provider": "demo", "method": "TRACE", "path": "/me"}),
            "method: must be one of: GET, POST, PUT, PATCH, DELETE, HEAD",
        ),
        (
            "provider_request",
            json!({"provider": "demo", "method": "GET", "path": "/me", "token": "x"}),
            "token: not an argument of this tool",
        ),
        ("count_to", json!({"count": "three"}), "count: must be of type integer"),
        ("count_to", json!({"count": 6}), "count: greater than 5"),
        ("count_to", json!({}), "count: required"),
    ];
    for (tool, arguments, message) in cases {
        let error = refusal(&client, tool, arguments.clone()).await;
        assert_eq!(error.code.0, -32602, "{tool} {arguments}");
        assert_eq!(error.message, message, "{tool} {arguments}");
    }
    assert!(
        app.state.core.store.authorizations().for_user(&app.user_id(ALICE).await, 10).await.unwrap().is_empty(),
        "nothing ran"
    );

    // Valid calls still work.
    let listed = client.call("list_connections", json!({})).await.unwrap();
    assert_ne!(listed.is_error, Some(true));
    let counted = client.call("count_to", json!({"count": 3})).await.unwrap();
    assert_eq!(counted.content[0].as_text().unwrap().text, "counted to 3");
    let asked = refusal(&client, "provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    assert_eq!(asked.code.0, -32042, "a valid call reaches the tool: {asked:?}");
    client.close().await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_schemas_are_enforced_on_sqlite() {
    tool_arguments_are_checked_against_the_advertised_schema(crate::helpers::Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_schemas_are_enforced_on_postgres() {
    tool_arguments_are_checked_against_the_advertised_schema(crate::helpers::Backend::Postgres).await;
}
