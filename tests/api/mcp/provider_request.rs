//! `provider_request`: forwards method, path, query and body; cannot leave the API base;
//! returns status, headers and body; disconnect revokes at the provider.

use serde_json::json;

use crate::helpers::{ALICE, TestApp};
use crate::on_both_backends;

async fn requests_are_forwarded_and_confined_to_the_provider_api(app: &TestApp) {
    let client = app.connected_client(ALICE).await;
    let echo = client
        .call(
            "provider_request",
            json!({"provider": "demo", "method": "GET", "path": "/echo", "query": {"q": "a b", "n": 3}}),
        )
        .await
        .unwrap();
    let structured = echo.structured_content.unwrap();
    assert_eq!(structured["status"], 200, "{structured}");
    assert_eq!(structured["body"]["method"], "GET");
    assert!(structured["headers"]["content-type"].as_str().unwrap().contains("json"));
    let query = structured["body"]["query"].as_str().unwrap_or_default().to_owned();
    assert!(query.contains("q=a+b") || query.contains("q=a%20b"), "{query}");

    for evil in [
        "/../token",
        "%2e%2e/%2e%2e/token",
        "//evil.example/x",
        "https://evil.example/x",
        // Disguised traversal a normalising server would honour: parameters, double encoding,
        // overlong UTF-8.
        "/..;/token",
        "/%252e%252e/token",
        "/%c0%ae%c0%ae/token",
    ] {
        let result =
            client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": evil})).await.unwrap();
        assert_eq!(result.is_error, Some(true), "{evil} must be refused");
        let shown = serde_json::to_string(&result.content).unwrap();
        assert!(shown.contains("path must be relative"), "{evil} is refused before any request: {shown}");
    }
    // Outside the tool's schema: refused with -32602 before the tool runs.
    for bad in [
        json!({"provider": "demo", "method": "TRACE", "path": "/me"}),
        json!({"provider": "nope", "method": "GET", "path": "/me"}),
    ] {
        match client.call("provider_request", bad.clone()).await {
            Err(rmcp::ServiceError::McpError(error)) => assert_eq!(error.code.0, -32602, "{bad}"),
            other => panic!("{bad}: expected -32602, got {other:?}"),
        }
    }

    // A scope the grant lacks: the provider's 403 comes back as a tool error with its status.
    let write = client
        .call(
            "provider_request",
            json!({"provider": "demo", "method": "POST", "path": "/notes", "body": {"text": "hi"}}),
        )
        .await
        .unwrap();
    assert_eq!(write.is_error, Some(true));
    assert_eq!(write.structured_content.unwrap()["status"], 403);
}
on_both_backends!(forwarding, requests_are_forwarded_and_confined_to_the_provider_api);

async fn disconnecting_revokes_the_tokens_at_the_provider(app: &TestApp) {
    let client = app.connected_client(ALICE).await;
    let user = app.user_id(ALICE).await;
    let grant = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
    let owner = format!("{user}/demo");
    let ctx =
        oauth_broker::crypto::SealContext { table: "grants", column: "access_token", row_id: &grant.id, owner: &owner };
    let token = String::from_utf8(app.state.core.sealer.open(&grant.access_token_sealed, ctx).unwrap()).unwrap();

    let result = client.call("disconnect_account", json!({"provider": "demo"})).await.unwrap();
    assert_ne!(result.is_error, Some(true));
    assert!(app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().is_none());
    // The old access token no longer works at the provider.
    let direct = app.http().get(app.url("/demo-provider/api/me")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(direct.status(), 401);
}
on_both_backends!(disconnect, disconnecting_revokes_the_tokens_at_the_provider);
