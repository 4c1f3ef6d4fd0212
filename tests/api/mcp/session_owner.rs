//! An MCP session belongs to the user who opened it for as long as it lives: its id opens nothing
//! with another user's token, however long the app clock has run since its owner's last request.

use serde_json::json;

use crate::helpers::{ALICE, BOB, TestApp};
use crate::on_both_backends;

async fn raw_initialize(app: &TestApp, token: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let response = app
        .http()
        .post(app.mcp_url())
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.headers().get("mcp-session-id").unwrap().to_str().unwrap().to_owned()
}

async fn ping(app: &TestApp, token: &str, session: &str) -> reqwest::StatusCode {
    app.http()
        .post(app.mcp_url())
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .send()
        .await
        .unwrap()
        .status()
}

/// A session alive for an hour without a request on the app clock (rmcp keeps it alive on its
/// own timer) is still bound to its owner: Alice's live session id never works with Bob's token.
async fn a_live_session_whose_owner_was_forgotten_must_not_open_to_other_users(app: &TestApp) {
    let alice = app.token_for(ALICE).await;
    let bob = app.token_for(BOB).await;
    let session = raw_initialize(app, &alice).await;
    assert_eq!(ping(app, &bob, &session).await, 403, "bound while fresh");

    // An hour passes on the app clock (e.g. a long connect_wait with progress keeping rmcp's
    // session alive); any new session's bind() then prunes Alice's entry.
    app.clock.advance(3601);
    let _bob_session = raw_initialize(app, &bob).await;

    let status = ping(app, &bob, &session).await;
    assert!(
        status == 403 || status == 404,
        "Bob used Alice's live MCP session with his own token: HTTP {status} (session id acted as a credential)"
    );
}
on_both_backends!(forgotten_session_owner, a_live_session_whose_owner_was_forgotten_must_not_open_to_other_users);
