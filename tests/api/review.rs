//! Security review: attacks that currently succeed. Each test asserts the *secure* behaviour,
//! so it fails until the weakness is fixed.

use rmcp::ServiceError;
use serde_json::json;

use crate::helpers::{ALICE, BOB, ClientKind, TestApp, hidden_field, location};
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

/// `SessionRegistry` forgets owners by the app clock (1 h without a request) while rmcp keeps the
/// session alive on its own timer, and `enforce_session_owner` lets an *unknown* session through.
/// Once forgotten, Alice's live session id works with anybody's token.
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

/// A pending link for `name` from a fresh MCP session; returns (connect URL, elicitation id).
async fn pending_link(app: &TestApp, name: &str) -> (String, String, crate::helpers::McpClient) {
    let client = app.mcp_client(name, ClientKind::Url).await;
    let error = match client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await
    {
        Err(ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    let e = &error.data.unwrap()["elicitations"][0];
    (e["url"].as_str().unwrap().to_owned(), e["elicitationId"].as_str().unwrap().to_owned(), client)
}

/// Approves `url` in `browser` (already signed in) and returns the callback URL the demo
/// provider redirects to (not yet followed).
async fn callback_for(app: &TestApp, browser: &reqwest::Client, url: &str) -> String {
    let consent = browser.get(url).send().await.unwrap().text().await.unwrap();
    let csrf = hidden_field(&consent, "csrf_token").unwrap();
    let approved =
        browser.post(url).form(&[("csrf_token", csrf.as_str()), ("action", "approve")]).send().await.unwrap();
    assert_eq!(approved.status(), 303);
    app.demo_provider_redirect(browser, &location(&approved), "demo-user", "approve").await
}

/// Two first-time completions for the same (user, provider) race in `store_grant`: both pick a
/// fresh grant id in `grant_id_for`, seal for it, and the loser's `ON CONFLICT DO UPDATE`
/// overwrites the winner's row with tokens sealed for an id the row does not have. The grant
/// stays `active` but can never be opened again (every tool call: internal error) until the
/// user disconnects.
async fn concurrent_first_connections_must_not_leave_an_unopenable_grant(app: &TestApp) {
    let user = app.user_id(ALICE).await;
    for attempt in 0..8 {
        let (url_a, _, client) = pending_link(app, ALICE).await;
        let (url_b, _, _other) = pending_link(app, ALICE).await;
        let browser = app.browser();
        let path = url_a.strip_prefix(&app.address).unwrap().to_owned();
        app.sign_in(&browser, ALICE, &path).await;
        let cb_a = callback_for(app, &browser, &url_a).await;
        let cb_b = callback_for(app, &browser, &url_b).await;
        let (a, b) = tokio::join!(browser.get(&cb_a).send(), browser.get(&cb_b).send());
        let (a, b) = (a.unwrap().status(), b.unwrap().status());

        let grant = app.state.core.store.grants().latest(&user, "demo").await.unwrap().unwrap();
        let owner = format!("{user}/demo");
        let ctx = oauth_broker::crypto::SealContext {
            table: "grants",
            column: "access_token",
            row_id: &grant.id,
            owner: &owner,
        };
        let opens = app.state.core.sealer.open(&grant.access_token_sealed, ctx).is_ok();
        let me = client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
        assert!(
            opens && me.is_ok(),
            "attempt {attempt}: callbacks answered {a} and {b}; the stored grant (status {}) no longer opens: {me:?}",
            grant.status
        );
        // Start over from no grant.
        app.state.core.store.grants().delete_at(&user, "demo").await.unwrap();
    }
}
on_both_backends!(grant_upsert_race, concurrent_first_connections_must_not_leave_an_unopenable_grant);
