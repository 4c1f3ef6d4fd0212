//! The broker flow end to end: tool call → elicitation → browser → provider → callback →
//! notification → the tool works with the stored token.

use std::time::Duration;

use rmcp::ServiceError;
use serde_json::json;

use oauth_broker::store::authorizations::AuthorizationStatus;

use crate::helpers::{ALICE, ClientKind, TestApp};
use crate::on_both_backends;

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n")
}

fn connect_url_in(text: &str) -> String {
    let start = text.find("http://").expect("a URL in the text");
    text[start..].split_whitespace().next().unwrap().to_owned()
}

async fn inline_url_elicitation_connects_and_notifies_the_session(app: &TestApp) {
    // Arrange: a client that declared URL-mode elicitation.
    let client = std::sync::Arc::new(app.mcp_client(ALICE, ClientKind::Url).await);

    // Act: connect_account waits inline while the "user" approves in the browser.
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.call("connect_account", json!({"provider": "demo", "scopes": ["profile", "notes:read"]})).await }
    });
    let (url, elicitation_id) = client.next_url_elicitation().await;
    assert!(url.starts_with(&app.url("/connect/")), "the URL is our own connect page: {url}");
    // The user takes a while: the waiting call reports progress (every `progress_interval`).
    assert!(client.wait_for_progress(1, Duration::from_secs(10)).await, "progress while waiting for the browser");
    assert!(url.ends_with(&elicitation_id), "the URL carries only the opaque elicitation id");
    let browser = app.browser();
    let callback = app.approve_in_browser(&browser, &url, ALICE).await;
    assert_eq!(callback.status(), 200);
    assert!(callback.text().await.unwrap().contains("Return to your MCP client"));

    // Assert: the tool finished successfully, the session was notified, the grant works.
    let result = call.await.unwrap().unwrap();
    assert_ne!(result.is_error, Some(true), "connect_account: {}", text_of(&result));
    assert!(text_of(&result).contains("Connected to Demo Provider"));
    assert_eq!(client.next_completion(Duration::from_secs(10)).await.as_deref(), Some(elicitation_id.as_str()));
    let me =
        client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await.unwrap();
    let structured = me.structured_content.clone().expect("structured content");
    assert_eq!(structured["status"], 200, "{structured}");
    assert_eq!(structured["body"]["account"], "demo-user");
    let row = app.state.core.store.authorizations().by_id(&elicitation_id).await.unwrap().unwrap();
    assert_eq!(row.status, AuthorizationStatus::Completed);
    assert!(row.pkce_verifier_sealed.is_none(), "the verifier is wiped after use");
    let connections = client.call("list_connections", json!({})).await.unwrap();
    let demo = &connections.structured_content.unwrap()["connections"][0];
    assert_eq!(demo["status"], "connected");
    assert_eq!(demo["account"], "demo-user");
}
on_both_backends!(inline_url_elicitation, inline_url_elicitation_connects_and_notifies_the_session);

async fn other_tools_answer_32042_then_succeed_after_the_browser_flow(app: &TestApp) {
    let client = app.mcp_client(ALICE, ClientKind::Url).await;

    let first = client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    let error = match first {
        Err(ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    assert_eq!(error.code.0, -32042);
    let elicitation = &error.data.as_ref().unwrap()["elicitations"][0];
    assert_eq!(elicitation["mode"], "url");
    let url = elicitation["url"].as_str().unwrap().to_owned();
    let id = elicitation["elicitationId"].as_str().unwrap().to_owned();
    assert!(client.no_elicitation_was_sent().await, "-32042 is instead of, not in addition to, elicitation/create");

    // A second failing call reuses the same link instead of minting another.
    let again = client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    match again {
        Err(ServiceError::McpError(e)) => assert_eq!(e.data.unwrap()["elicitations"][0]["elicitationId"], id.as_str()),
        other => panic!("expected -32042 again, got {other:?}"),
    }

    let browser = app.browser();
    assert_eq!(app.approve_in_browser(&browser, &url, ALICE).await.status(), 200);
    assert_eq!(client.next_completion(Duration::from_secs(10)).await.as_deref(), Some(id.as_str()));

    let retried =
        client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await.unwrap();
    assert_eq!(retried.structured_content.unwrap()["status"], 200);
}
on_both_backends!(url_elicitation_required_error, other_tools_answer_32042_then_succeed_after_the_browser_flow);

async fn clients_without_url_mode_get_the_link_as_text_and_succeed_on_retry(app: &TestApp) {
    for kind in [ClientKind::NoElicitation, ClientKind::FormOnly] {
        let client = app.mcp_client(ALICE, kind).await;
        // Scopes named, so no form question: this test is about the link.
        let result = client.call("connect_account", json!({"provider": "demo", "scopes": ["profile"]})).await.unwrap();
        assert_eq!(result.is_error, Some(true));
        let text = text_of(&result);
        assert!(text.contains("Demo Provider"), "names the provider: {text}");
        assert!(client.no_elicitation_was_sent().await, "never a mode the client did not declare ({kind:?})");
        let other =
            client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await.unwrap();
        assert_eq!(other.is_error, Some(true), "no -32042 for a client without URL mode");

        let browser = app.browser();
        assert_eq!(app.approve_in_browser(&browser, &connect_url_in(&text), ALICE).await.status(), 200);
        let retried =
            client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await.unwrap();
        assert_eq!(retried.structured_content.unwrap()["status"], 200, "{kind:?}");
        client.call("disconnect_account", json!({"provider": "demo"})).await.unwrap();
        client.close().await;
    }
}
on_both_backends!(no_url_mode, clients_without_url_mode_get_the_link_as_text_and_succeed_on_retry);

async fn declining_at_the_client_or_on_the_consent_page_is_reported(app: &TestApp) {
    // Declined in the client: the row is closed as declined.
    let declining = app.mcp_client(ALICE, ClientKind::UrlDeclining).await;
    let result = declining.call("connect_account", json!({"provider": "demo", "scopes": ["profile"]})).await.unwrap();
    assert_eq!(result.is_error, Some(true));
    assert!(text_of(&result).contains("declined"));
    let (_, id) = declining.next_url_elicitation().await;
    assert_eq!(
        app.state.core.store.authorizations().by_id(&id).await.unwrap().unwrap().status,
        AuthorizationStatus::Declined
    );

    // Declined on the consent page: the waiting call reports it.
    let client = std::sync::Arc::new(app.mcp_client(ALICE, ClientKind::Url).await);
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.call("connect_account", json!({"provider": "demo", "scopes": ["profile"]})).await }
    });
    let (url, id) = client.next_url_elicitation().await;
    let browser = app.browser();
    let path = url.strip_prefix(&app.address).unwrap().to_owned();
    app.sign_in(&browser, ALICE, &path).await;
    let consent = browser.get(&url).send().await.unwrap().text().await.unwrap();
    let csrf = crate::helpers::hidden_field(&consent, "csrf_token").unwrap();
    let denied = browser.post(&url).form(&[("csrf_token", csrf.as_str()), ("action", "deny")]).send().await.unwrap();
    assert_eq!(denied.status(), 200);
    let result = call.await.unwrap().unwrap();
    assert_eq!(result.is_error, Some(true));
    assert!(text_of(&result).contains("declined"), "{}", text_of(&result));
    assert_eq!(
        app.state.core.store.authorizations().by_id(&id).await.unwrap().unwrap().status,
        AuthorizationStatus::Declined
    );
    assert!(app.state.core.store.grants().latest(&app.user_id(ALICE).await, "demo", None).await.unwrap().is_none());
}
on_both_backends!(declines, declining_at_the_client_or_on_the_consent_page_is_reported);

async fn the_completion_notification_reaches_only_the_session_that_started_it(app: &TestApp) {
    let starter = app.mcp_client(ALICE, ClientKind::Url).await;
    let same_user_other_session = app.mcp_client(ALICE, ClientKind::Url).await;
    let other_user = app.mcp_client(crate::helpers::BOB, ClientKind::Url).await;
    // Every session has made a request (so each has its own listener running).
    for client in [&starter, &same_user_other_session, &other_user] {
        client.call("list_connections", json!({})).await.unwrap();
    }
    let error =
        match starter.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await {
            Err(ServiceError::McpError(e)) => e,
            other => panic!("expected -32042, got {other:?}"),
        };
    let elicitation = &error.data.unwrap()["elicitations"][0];
    let url = elicitation["url"].as_str().unwrap().to_owned();
    let id = elicitation["elicitationId"].as_str().unwrap().to_owned();
    let browser = app.browser();
    assert_eq!(app.approve_in_browser(&browser, &url, ALICE).await.status(), 200);

    assert_eq!(starter.next_completion(Duration::from_secs(10)).await.as_deref(), Some(id.as_str()));
    assert_eq!(same_user_other_session.next_completion(Duration::from_secs(2)).await, None);
    assert_eq!(other_user.next_completion(Duration::from_millis(500)).await, None);
    // The grant is the user's, so the other session of the same user can use it too.
    let used = same_user_other_session
        .call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"}))
        .await
        .unwrap();
    assert_eq!(used.structured_content.unwrap()["status"], 200);
    // Bob is still not connected.
    assert!(matches!(
        other_user.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await,
        Err(ServiceError::McpError(e)) if e.code.0 == -32042
    ));
}
on_both_backends!(notification_routing, the_completion_notification_reaches_only_the_session_that_started_it);
