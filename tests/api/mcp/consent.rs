//! Consent per client (MCP security best practices §Confused deputy): a user's connection is
//! used by a client only after the user allowed that client, with every scope the connection
//! carries. Another client, or a connection that gained scopes, asks again; users see and
//! withdraw these consents on their connections page.

use std::sync::Arc;

use rmcp::ServiceError;
use rmcp::model::{CallToolResult, ErrorData};
use serde_json::{Value, json};

use oauth_broker::store::authorizations::{AuthorizationKind, AuthorizationStatus};

use crate::helpers::demo_tool::DemoTool;
use crate::helpers::{ALICE, BOB, ClientKind, McpClient, TestApp, hidden_field, hidden_fields};
use crate::on_both_backends;

const OTHER_TOOL: &str = "other-tool";

fn me() -> Value {
    json!({"provider": "demo", "method": "GET", "path": "/me"})
}

/// `provider_request GET /me`: the result, or the protocol error.
async fn call_me(client: &McpClient) -> Result<CallToolResult, ErrorData> {
    match client.call("provider_request", me()).await {
        Ok(result) => Ok(result),
        Err(ServiceError::McpError(error)) => Err(error),
        Err(other) => panic!("transport failure: {other:?}"),
    }
}

async fn works(client: &McpClient) -> bool {
    matches!(call_me(client).await, Ok(result) if result.structured_content.as_ref().is_some_and(|s| s["status"] == 200))
}

/// The `-32042` a client gets when it may not use the connection yet: (url, elicitation id).
async fn consent_link(client: &McpClient) -> (String, String) {
    let error = call_me(client).await.expect_err("the call needs the user's permission first");
    assert_eq!(error.code.0, -32042);
    assert!(error.message.contains("permission"), "says what is needed: {}", error.message);
    let elicitation = &error.data.unwrap()["elicitations"][0];
    let message = elicitation["message"].as_str().unwrap();
    assert!(message.contains("existing Demo Provider connection"), "{message}");
    (elicitation["url"].as_str().unwrap().to_owned(), elicitation["elicitationId"].as_str().unwrap().to_owned())
}

async fn other_client(app: &TestApp, name: &str, label: &str, kind: ClientKind) -> McpClient {
    let token = app.token_for_client(name, label).await;
    app.mcp_client_with_token(&token, kind).await.unwrap()
}

async fn allowed_flag(client: &McpClient) -> bool {
    let listed = client.call("list_connections", json!({})).await.unwrap();
    let connections = listed.structured_content.unwrap()["connections"].clone();
    let demo = connections.as_array().unwrap().iter().find(|c| c["provider"] == "demo").unwrap().clone();
    demo["allowed_for_this_client"].as_bool().unwrap()
}

async fn first_client_connects_and_a_second_client_must_be_allowed(app: &TestApp) {
    let first = app.connected_client(ALICE).await;
    assert!(works(&first).await, "the client that connected may use the connection");
    assert!(allowed_flag(&first).await);
    let user = app.user_id(ALICE).await;
    let grant = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();

    let second = other_client(app, ALICE, OTHER_TOOL, ClientKind::Url).await;
    assert!(!allowed_flag(&second).await, "list_connections tells the second client it is not allowed yet");
    let (url, id) = consent_link(&second).await;
    let row = app.state.core.store.authorizations().by_id(&id).await.unwrap().unwrap();
    assert_eq!((row.kind, row.grant_id.as_deref()), (AuthorizationKind::Consent, Some(grant.id.as_str())));
    assert_eq!(row.client_key, format!("token:{OTHER_TOOL}"));
    // Asking again while the link is open reuses it.
    assert_eq!(consent_link(&second).await.1, id);

    let browser = app.browser();
    let page = app.allow_in_browser(&browser, &url, ALICE).await;
    let named =
        "<strong>other-tool</strong> <span class=\"muted\">(a program an operator issued you a token for)</span>";
    for expected in [named, "Demo Provider", "demo-user", "profile", "notes:read", "Read your notes"] {
        assert!(page.contains(expected), "the page names {expected}: {page}");
    }
    assert!(second.next_completion(std::time::Duration::from_secs(10)).await.is_some_and(|done| done == id));
    assert!(works(&second).await, "allowed now");
    assert!(allowed_flag(&second).await);
    // Allowing changed no token: nothing went to the provider.
    let after = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
    assert_eq!((after.version, after.updated_at), (grant.version, grant.updated_at));
    let audit = app.state.core.store.audit().entries(Some(&user), 50).await.unwrap();
    assert!(
        audit.iter().any(|e| e.action == "consent.granted" && e.detail.as_deref().unwrap_or("").contains(OTHER_TOOL))
    );
    // The used link is spent.
    let again = browser.get(&url).send().await.unwrap().text().await.unwrap();
    assert!(again.contains("Already allowed"), "{again}");
}
on_both_backends!(second_client_asks, first_client_connects_and_a_second_client_must_be_allowed);

async fn a_client_waiting_on_connect_account_is_allowed_inline(app: &TestApp) {
    let _first = app.connected_client(ALICE).await;
    let second = Arc::new(other_client(app, ALICE, OTHER_TOOL, ClientKind::Url).await);
    let call = tokio::spawn({
        let second = second.clone();
        async move {
            let arguments = json!({"provider": "demo", "account": "demo-user", "scopes": ["profile", "notes:read"]});
            second.call("connect_account", arguments).await
        }
    });
    let (url, _) = second.next_url_elicitation().await;
    app.allow_in_browser(&app.browser(), &url, ALICE).await;
    let result = call.await.unwrap().unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let structured = result.structured_content.unwrap();
    assert_eq!((structured["connected"].clone(), structured["account"].clone()), (json!(true), json!("demo-user")));
    assert!(works(&second).await);
}
on_both_backends!(inline_consent, a_client_waiting_on_connect_account_is_allowed_inline);

async fn a_connection_that_gains_scopes_asks_other_clients_again(app: &TestApp) {
    let first = app.connected_client(ALICE).await;
    let second = Arc::new(other_client(app, ALICE, OTHER_TOOL, ClientKind::Url).await);
    let (url, _) = consent_link(&second).await;
    app.allow_in_browser(&app.browser(), &url, ALICE).await;
    assert!(works(&second).await);

    // The second client asks for one more scope: a real reconnect at the provider.
    let call = tokio::spawn({
        let second = second.clone();
        async move {
            second
                .call(
                    "connect_account",
                    json!({"provider": "demo", "scopes": ["profile", "notes:read", "notes:write"]}),
                )
                .await
        }
    });
    let (url, _) = second.next_url_elicitation().await;
    assert_eq!(app.approve_in_browser(&app.browser(), &url, ALICE).await.status(), 200);
    assert_ne!(call.await.unwrap().unwrap().is_error, Some(true));
    assert!(works(&second).await, "the client that asked for more may use it");

    // The first client was allowed the old scopes only: asked again, with the new one marked.
    let (url, _) = consent_link(&first).await;
    let page = app.allow_in_browser(&app.browser(), &url, ALICE).await;
    assert!(page.contains("notes:write</code> <strong>new</strong>"), "{page}");
    assert!(works(&first).await);
}
on_both_backends!(more_scopes_ask_again, a_connection_that_gains_scopes_asks_other_clients_again);

async fn a_consent_link_needs_its_owner_and_csrf_and_a_decline_allows_nothing(app: &TestApp) {
    let _first = app.connected_client(ALICE).await;
    let second = other_client(app, ALICE, OTHER_TOOL, ClientKind::Url).await;
    let (url, id) = consent_link(&second).await;
    let user = app.user_id(ALICE).await;
    let grant = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
    let consent_of_second =
        || async { app.state.core.store.consents().find(&grant.id, "token:other-tool").await.unwrap() };

    // Bob, signed in, cannot see or act on Alice's link.
    let bob = app.browser();
    app.sign_in(&bob, BOB, "/").await;
    assert_eq!(bob.get(&url).send().await.unwrap().status(), 403);
    let bob_page = bob.get(app.url("/connections")).send().await.unwrap().text().await.unwrap();
    let bob_csrf = hidden_field(&bob_page, "csrf_token").unwrap();
    let posted = bob.post(&url).form(&[("csrf_token", bob_csrf.as_str()), ("action", "approve")]).send().await.unwrap();
    assert_eq!(posted.status(), 403);
    assert!(consent_of_second().await.is_none());

    // Alice without the right CSRF token: refused.
    let alice = app.browser();
    let path = url.strip_prefix(&app.address).unwrap();
    app.sign_in(&alice, ALICE, path).await;
    for forged in ["", "not-the-token"] {
        let posted = alice.post(&url).form(&[("csrf_token", forged), ("action", "approve")]).send().await.unwrap();
        assert_eq!(posted.status(), 403, "csrf {forged:?}");
    }
    assert!(consent_of_second().await.is_none());

    // Alice declines: nothing is allowed, and the next call asks with a fresh link.
    let page = alice.get(&url).send().await.unwrap().text().await.unwrap();
    let csrf = hidden_field(&page, "csrf_token").unwrap();
    let declined = alice.post(&url).form(&[("csrf_token", csrf.as_str()), ("action", "deny")]).send().await.unwrap();
    assert_eq!(declined.status(), 200);
    assert_eq!(
        app.state.core.store.authorizations().by_id(&id).await.unwrap().unwrap().status,
        AuthorizationStatus::Declined
    );
    assert!(consent_of_second().await.is_none());
    let (_, next) = consent_link(&second).await;
    assert_ne!(next, id);

    // An expired link allows nothing.
    app.clock.advance(11 * 60);
    let (url, _) = consent_link(&second).await;
    app.clock.advance(11 * 60);
    assert_eq!(alice.get(&url).send().await.unwrap().status(), 410);
    assert!(consent_of_second().await.is_none());
}
on_both_backends!(consent_link_guards, a_consent_link_needs_its_owner_and_csrf_and_a_decline_allows_nothing);

async fn a_client_without_url_mode_gets_the_consent_link_as_text(app: &TestApp) {
    let _first = app.connected_client(ALICE).await;
    let plain = other_client(app, ALICE, OTHER_TOOL, ClientKind::NoElicitation).await;
    let result = call_me(&plain).await.unwrap();
    assert_eq!(result.is_error, Some(true));
    let text = result.content[0].as_text().unwrap().text.clone();
    assert!(text.contains("may not use your Demo Provider connection yet"), "{text}");
    let start = text.find("http://").unwrap();
    let url = text[start..].split_whitespace().next().unwrap().to_owned();
    app.allow_in_browser(&app.browser(), &url, ALICE).await;
    assert!(works(&plain).await);
}
on_both_backends!(consent_as_text, a_client_without_url_mode_gets_the_consent_link_as_text);

async fn the_connections_page_lists_clients_and_withdraws_one(app: &TestApp) {
    let first = app.connected_client(ALICE).await;
    let second = other_client(app, ALICE, OTHER_TOOL, ClientKind::Url).await;
    let (url, _) = consent_link(&second).await;
    let browser = app.browser();
    app.allow_in_browser(&browser, &url, ALICE).await;

    let page = browser.get(app.url("/connections")).send().await.unwrap().text().await.unwrap();
    // Every client is named the same way: its name first, then what kind of name it is.
    let unnamed = "<strong>Unnamed program</strong> <span class=\"muted\">(an operator issued you a token without naming the program);";
    let labelled = "<strong>other-tool</strong> <span class=\"muted\">(a program an operator issued you a token for);";
    assert!(page.contains(unnamed) && page.contains(labelled), "{page}");
    let csrf = hidden_field(&page, "csrf_token").unwrap();
    let grant_id = hidden_field(&page, "grant_id").unwrap();
    let keys: Vec<String> =
        hidden_fields(&page).into_iter().filter(|(k, _)| k == "client_key").map(|(_, v)| v).collect();
    assert_eq!(keys.len(), 2, "one Withdraw per client: {keys:?}");
    let withdraw = |browser: &reqwest::Client, csrf: &str, grant: &str, client: &str| {
        let form = [("csrf_token", csrf.to_owned()), ("grant_id", grant.to_owned()), ("client_key", client.to_owned())];
        let request = browser.post(app.url("/connections/clients/revoke")).form(&form);
        async move { request.send().await.unwrap().status() }
    };

    // Bob cannot withdraw Alice's consent; a forged CSRF token withdraws nothing.
    let bob = app.browser();
    app.sign_in(&bob, BOB, "/").await;
    let bob_csrf =
        hidden_field(&bob.get(app.url("/connections")).send().await.unwrap().text().await.unwrap(), "csrf_token")
            .unwrap();
    assert_eq!(withdraw(&bob, &bob_csrf, &grant_id, "token:other-tool").await, 404);
    assert_eq!(withdraw(&browser, "forged", &grant_id, "token:other-tool").await, 403);
    assert!(works(&second).await);

    assert_eq!(withdraw(&browser, &csrf, &grant_id, "token:other-tool").await, 303);
    assert!(works(&first).await, "the other client keeps its consent");
    let (_, _) = consent_link(&second).await;
    let user = app.user_id(ALICE).await;
    assert!(app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().is_some(), "the connection stays");
    assert_eq!(withdraw(&browser, &csrf, &grant_id, "token:other-tool").await, 404, "nothing left to withdraw");
}
on_both_backends!(connections_page_clients, the_connections_page_lists_clients_and_withdraws_one);

async fn disconnecting_removes_every_clients_consent(app: &TestApp) {
    let first = app.connected_client(ALICE).await;
    let second = other_client(app, ALICE, OTHER_TOOL, ClientKind::Url).await;
    let (url, _) = consent_link(&second).await;
    app.allow_in_browser(&app.browser(), &url, ALICE).await;
    let user = app.user_id(ALICE).await;
    assert_eq!(app.state.core.store.consents().for_user(&user).await.unwrap().len(), 2);

    // Revoked on the connections page.
    let browser = app.browser();
    app.sign_in(&browser, ALICE, "/").await;
    let page = browser.get(app.url("/connections")).send().await.unwrap().text().await.unwrap();
    let form = [
        ("csrf_token", hidden_field(&page, "csrf_token").unwrap()),
        ("grant_id", hidden_field(&page, "grant_id").unwrap()),
    ];
    assert_eq!(browser.post(app.url("/connections/revoke")).form(&form).send().await.unwrap().status(), 303);
    assert!(app.state.core.store.consents().for_user(&user).await.unwrap().is_empty());

    // Connecting again through the first client allows that client only.
    let (url, _) = match call_me(&first).await {
        Err(error) => {
            let e = &error.data.unwrap()["elicitations"][0];
            (e["url"].as_str().unwrap().to_owned(), e["elicitationId"].as_str().unwrap().to_owned())
        }
        Ok(other) => panic!("expected -32042, got {other:?}"),
    };
    assert_eq!(app.approve_in_browser(&app.browser(), &url, ALICE).await.status(), 200);
    assert!(works(&first).await);
    consent_link(&second).await;
}
on_both_backends!(disconnect_drops_consents, disconnecting_removes_every_clients_consent);

async fn a_session_opened_by_one_client_refuses_another_clients_token(app: &TestApp) {
    let http = app.http();
    let first = app.token_for(ALICE).await;
    let second = app.token_for_client(ALICE, OTHER_TOOL).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let post = |token: &str, body: &Value, session: Option<&str>| {
        let mut request = http
            .post(app.mcp_url())
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        async move { request.send().await.unwrap() }
    };
    let opened = post(&first, &init, None).await;
    let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    assert_eq!(post(&second, &ping, Some(&session)).await.status(), 403, "same user, another client");
    assert_eq!(post(&first, &ping, Some(&session)).await.status(), 200);
}
on_both_backends!(session_per_client, a_session_opened_by_one_client_refuses_another_clients_token);

async fn an_unallowed_client_makes_the_broker_touch_nothing(app: &TestApp) {
    let first = app.connected_client(ALICE).await;
    let user = app.user_id(ALICE).await;
    let before = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
    // Long after the access token expired: using it would mean a refresh at the provider.
    app.clock.advance(3 * 3600);
    let stranger = other_client(app, ALICE, OTHER_TOOL, ClientKind::NoElicitation).await;
    assert!(call_me(&stranger).await.unwrap().is_error == Some(true), "asked to be allowed");
    let after = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
    assert_eq!(after.version, before.version, "no refresh was made for a client the user has not allowed");

    // Nor may it disconnect (revoking at the provider is a use of the tokens).
    let refused = stranger.call("disconnect_account", json!({"provider": "demo"})).await.unwrap();
    assert_eq!(refused.is_error, Some(true));
    let text = refused.content[0].as_text().unwrap().text.clone();
    assert!(text.contains("not allowed") && text.contains("/connections"), "{text}");
    assert!(app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().is_some(), "still connected");
    assert!(works(&first).await, "the allowed client refreshes and goes on");
}
on_both_backends!(unallowed_touches_nothing, an_unallowed_client_makes_the_broker_touch_nothing);

async fn an_allow_page_for_a_connection_that_gained_scopes_allows_nothing(app: &TestApp) {
    let first = Arc::new(app.connected_client(ALICE).await);
    let second = other_client(app, ALICE, OTHER_TOOL, ClientKind::Url).await;
    let (stale_url, stale_id) = consent_link(&second).await;
    // Meanwhile the first client widens the connection.
    let call = tokio::spawn({
        let first = first.clone();
        async move {
            let arguments = json!({"provider": "demo", "scopes": ["profile", "notes:read", "notes:write"]});
            first.call("connect_account", arguments).await
        }
    });
    let (url, _) = first.next_url_elicitation().await;
    assert_eq!(app.approve_in_browser(&app.browser(), &url, ALICE).await.status(), 200);
    assert_ne!(call.await.unwrap().unwrap().is_error, Some(true));

    let browser = app.browser();
    let path = stale_url.strip_prefix(&app.address).unwrap();
    app.sign_in(&browser, ALICE, path).await;
    let page = browser.get(&stale_url).send().await.unwrap();
    assert_eq!(page.status(), 409);
    assert!(page.text().await.unwrap().contains("Connection changed"));
    assert_eq!(
        app.state.core.store.authorizations().by_id(&stale_id).await.unwrap().unwrap().status,
        AuthorizationStatus::Failed
    );
    // The next call asks with the current list.
    let (url, _) = consent_link(&second).await;
    let html = app.allow_in_browser(&browser, &url, ALICE).await;
    assert!(html.contains("notes:write"), "{html}");
    assert!(works(&second).await);
}
on_both_backends!(stale_allow_page, an_allow_page_for_a_connection_that_gained_scopes_allows_nothing);

/// The `-32042` an extension tool answers when it may not have the token yet.
async fn asked(client: &McpClient) -> ErrorData {
    match client.call("demo_account_name", json!({})).await {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("expected -32042, got {other:?}"),
    }
}

async fn extension_tools_get_tokens_only_for_allowed_clients(backend: crate::helpers::Backend) {
    let Some(app) = crate::helpers::spawn_app_with(backend, |builder| builder.extension(DemoTool)).await else {
        return;
    };
    let first = app.mcp_client(ALICE, ClientKind::Url).await;
    let connect = asked(&first).await;
    assert_eq!(connect.code.0, -32042);
    let url = connect.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();
    assert_eq!(app.approve_in_browser(&app.browser(), &url, ALICE).await.status(), 200);
    let named = first.call("demo_account_name", json!({})).await.unwrap();
    assert_eq!(named.content[0].as_text().unwrap().text, "demo-user");

    let second = other_client(&app, ALICE, OTHER_TOOL, ClientKind::Url).await;
    let consent = asked(&second).await;
    assert!(consent.message.contains("permission"), "{}", consent.message);
    let url = consent.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();
    app.allow_in_browser(&app.browser(), &url, ALICE).await;
    let named = second.call("demo_account_name", json!({})).await.unwrap();
    assert_eq!(named.content[0].as_text().unwrap().text, "demo-user");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_tokens_on_sqlite() {
    extension_tools_get_tokens_only_for_allowed_clients(crate::helpers::Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_tokens_on_postgres() {
    extension_tools_get_tokens_only_for_allowed_clients(crate::helpers::Backend::Postgres).await;
}
