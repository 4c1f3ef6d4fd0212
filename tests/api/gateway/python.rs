//! Gateway mode (issue 26, item 7) with a server that is not ours: `tests/python/echo_server.py`,
//! written with the official MCP Python SDK, in its own process, behind the broker with
//! `provider` auth; the user's rmcp client talks to the broker only, in either protocol era.
//!
//! The interpreter is the one `tests/api/mcp/python_client.rs` uses (`MCP_PYTHON`, else the venv
//! `bash .ci/python.sh` makes); without it the tests print `SKIPPED python: …`, unless
//! `REQUIRE_PYTHON_MCP=1`, where they fail.

use std::sync::Arc;

use serde_json::json;

use crate::helpers::gateway::{account_of, add_provider_server, connect_through_link, tool_names};
use crate::helpers::python::python_server;
use crate::helpers::*;
use crate::on_both_backends;

/// The text of the one content `uri` reads as.
async fn read_text(client: &McpClient, uri: &str) -> String {
    let read = client.service.read_resource(rmcp::model::ReadResourceRequestParams::new(uri)).await.unwrap();
    match &read.contents[..] {
        [rmcp::model::ResourceContents::TextResourceContents { text, .. }] => text.clone(),
        other => panic!("one text content expected: {other:?}"),
    }
}

fn credential_of(result: &rmcp::model::CallToolResult) -> String {
    result.structured_content.as_ref().unwrap()["credential_sha256"].as_str().unwrap().to_owned()
}

async fn a_python_sdk_server_gets_each_users_own_token_from_a_2025_11_25_client(app: &TestApp) {
    // Arrange: the Python server behind the broker, taking a demo-provider token.
    let Some(upstream) = python_server(app).await else { return };
    add_provider_server(app, "pyecho", &upstream).await;
    let alice = app.mcp_client(ALICE, ClientKind::Url).await;
    let bob = app.mcp_client(BOB, ClientKind::Url).await;

    // Act: each user connects through the broker's link, then calls the server's tool.
    connect_through_link(app, &alice, "pyecho_connect", ALICE, "alice-demo").await;
    let connected = alice.call("pyecho_connect", json!({})).await.unwrap();
    assert_ne!(connected.is_error, Some(true), "{connected:?}");
    assert!(tool_names(&alice).await.contains(&"pyecho_whoami".to_owned()), "the server's tool is listed");
    connect_through_link(app, &bob, "pyecho_whoami", BOB, "bob-demo").await;
    let alices = alice.call("pyecho_whoami", json!({})).await.unwrap();
    let bobs = bob.call("pyecho_whoami", json!({})).await.unwrap();

    // Assert: the server saw each user's own demo token (its provider says whose), never the
    // other's.
    assert_eq!(account_of(&alices), "alice-demo");
    assert_eq!(account_of(&bobs), "bob-demo");
    assert_eq!(credential_of(&alices).len(), 12);
    assert_ne!(credential_of(&alices), credential_of(&bobs));

    // The server's prompt and resources too: listed under its prefix and scheme, answered with
    // each user's own token.
    let prompts: Vec<String> = alice.peer().list_all_prompts().await.unwrap().into_iter().map(|p| p.name).collect();
    assert!(prompts.contains(&"pyecho_greeting".to_owned()), "{prompts:?}");
    let uris: Vec<String> = alice.peer().list_all_resources().await.unwrap().into_iter().map(|r| r.uri).collect();
    assert!(uris.contains(&"gateway://pyecho/pynote://hello".to_owned()), "{uris:?}");
    let mut params = rmcp::model::GetPromptRequestParams::new("pyecho_greeting");
    params.arguments = json!({"name": "Dee"}).as_object().cloned();
    let greeted = serde_json::to_value(bob.service.get_prompt(params).await.unwrap().messages).unwrap();
    assert_eq!(greeted[0]["content"]["text"], "Greet Dee on behalf of bob-demo.");
    assert_eq!(read_text(&alice, "gateway://pyecho/pynote://whoami/me").await, "me: alice-demo");
    assert_eq!(read_text(&bob, "gateway://pyecho/pynote://hello").await, "hello from python");
    alice.close().await;
    bob.close().await;
    upstream.stop().await;
}
on_both_backends!(python_server_2025, a_python_sdk_server_gets_each_users_own_token_from_a_2025_11_25_client);

async fn a_python_sdk_server_answers_a_2026_07_28_client_after_the_round_trip(app: &TestApp) {
    // Arrange: the Python server behind the broker; a stateless 2026-07-28 client.
    let Some(upstream) = python_server(app).await else { return };
    add_provider_server(app, "pyecho", &upstream).await;
    let client = Arc::new(app.mcp_client_2026(ALICE, ClientKind::Url).await);

    // Act: the first call gets the broker's link by round trip; the user approves; the
    // client's retry proceeds.
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.call("pyecho_connect", json!({})).await }
    });
    let (url, _) = client.next_url_elicitation().await;
    assert!(url.starts_with(&app.url("/connect/")), "the broker's own page: {url}");
    assert_eq!(app.approve_in_browser_as(&app.browser(), &url, ALICE, "alice-demo").await.status(), 200);
    let connected = call.await.unwrap().expect("the server's answer after the browser");
    assert_ne!(connected.is_error, Some(true), "{connected:?}");

    // Assert: the Python server answers the 2026-07-28 client's call with alice's token.
    let whoami = client.call("pyecho_whoami", json!({})).await.unwrap();
    assert_eq!(account_of(&whoami), "alice-demo");
    assert_eq!(read_text(&client, "gateway://pyecho/pynote://whoami/it").await, "it: alice-demo");
    upstream.stop().await;
}
on_both_backends!(python_server_2026, a_python_sdk_server_answers_a_2026_07_28_client_after_the_round_trip);
