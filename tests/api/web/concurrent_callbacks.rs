//! Two first-time connections of one user to one provider whose callbacks reach the broker at
//! once: the grant left behind opens, and the connection works.

use rmcp::ServiceError;
use serde_json::json;

use crate::helpers::{ALICE, ClientKind, TestApp, hidden_field, location};
use crate::on_both_backends;

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

/// Two first-time completions for the same (user, provider) race in `store_grant`: whichever
/// wins, the stored grant's tokens are sealed for the row that holds them, so the grant opens and
/// the next tool call works. (A row overwritten with tokens sealed for another row's id would stay
/// `active` and never open again: every tool call an internal error until the user disconnects.)
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

        let grant = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
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
