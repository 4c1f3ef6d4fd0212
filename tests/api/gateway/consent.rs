//! Gateway mode (issue 26, item 5): the user approves each (client, server) pair on the
//! broker's own pages before a client may call a server behind the broker — whatever the
//! server's auth kind — and can withdraw it on `/connections`.

use std::time::Duration;

use serde_json::json;

use crate::helpers::gateway::{
    Upstream, account_of, add_provider_server, connections_page, listed_approval, post_withdraw, served, servers_ok,
};
use crate::helpers::token_api::url_elicitation_required;
use crate::helpers::*;
use crate::on_both_backends;

/// Registers an open (`--auth none`) server as `name` and waits until this app lists its tools.
async fn add_open_server(app: &TestApp, name: &str, upstream: &Upstream) {
    servers_ok(app, &["add", name, "--url", &upstream.mcp_url, "--auth", "none"]).await;
    let echo = format!("{}_echo", name.replace('-', "_"));
    eventually("the server's tools are listed", Duration::from_secs(10), || served(app, &echo)).await;
}

async fn audited(app: &TestApp, user: &str, action: &str) -> usize {
    let user_id = app.user_id(user).await;
    app.state.core.store.audit_queue().flush().await;
    let entries = app.state.core.store.audit().entries(Some(&user_id), 200).await.unwrap();
    entries.iter().filter(|e| e.action == action).count()
}

async fn an_open_server_is_called_only_by_clients_the_user_approved_until_withdrawn(app: &TestApp) {
    // Arrange: a server that needs no credential, behind the broker; its tools are listed
    // before anyone approved anything (a client must be able to call them to be asked).
    let upstream = Upstream::start(&[], None).await;
    add_open_server(app, "tools", &upstream).await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    assert!(crate::helpers::gateway::tool_names(&client).await.contains(&"tools_echo".to_owned()));

    // Act: the first call gets the broker's own link (-32042), not the server's answer.
    let (_, url) = url_elicitation_required(client.call("tools_echo", json!({"text": "x"})).await);
    assert!(url.starts_with(&app.url("/connect/")), "the broker's own page: {url}");

    // Assert: the page names the server by its registered name and the client; approving
    // there needs no provider, and the call then proceeds.
    let browser = app.browser();
    let html = app.allow_in_browser(&browser, &url, ALICE).await;
    assert!(html.contains("Allow this client to call tools?"), "{html}");
    assert!(html.contains("Server behind the broker"), "{html}");
    let echoed = client.call("tools_echo", json!({"text": "x"})).await.unwrap();
    assert_ne!(echoed.is_error, Some(true), "{echoed:?}");
    assert_eq!(echoed.structured_content.unwrap()["text"], "x");
    assert_eq!(audited(app, ALICE, "gateway.consent.granted").await, 1);

    // Another client of the same user is asked again.
    let other_token = app.token_for_client(ALICE, "other-app").await;
    let other = app.mcp_client_with_token(&other_token, ClientKind::Url).await.unwrap();
    let (_, other_url) = url_elicitation_required(other.call("tools_echo", json!({"text": "y"})).await);
    assert_ne!(other_url, url);
    other.close().await;

    // The approval is listed on /connections, and withdrawing it there makes the first client
    // ask again at its next call.
    let page = connections_page(app, &browser).await;
    assert!(page.contains("id=\"servers\"") && page.contains("<strong>tools</strong>"), "{page}");
    let csrf = hidden_field(&page, "csrf_token").unwrap();
    let approval = listed_approval(&page);
    // Another user's pair posted back withdraws nothing.
    let bob_browser = app.browser();
    assert_eq!(app.sign_in(&bob_browser, BOB, "/connections").await.status(), 303);
    let bobs_page = connections_page(app, &bob_browser).await;
    let bob_csrf = hidden_field(&bobs_page, "csrf_token").unwrap();
    assert_eq!(post_withdraw(app, &bob_browser, &bob_csrf, &approval).await, 404);
    assert!(connections_page(app, &browser).await.contains("id=\"servers\""), "still approved");
    let withdrawn = post_withdraw(app, &browser, &csrf, &approval).await;
    assert_eq!(withdrawn, 303);
    assert!(!connections_page(app, &browser).await.contains("id=\"servers\""));
    let (_, again) = url_elicitation_required(client.call("tools_echo", json!({"text": "x"})).await);
    assert!(again.starts_with(&app.url("/connect/")));
    assert_eq!(audited(app, ALICE, "gateway.consent.withdrawn").await, 1);

    client.close().await;
    upstream.stop().await;
}
on_both_backends!(open_server_pair, an_open_server_is_called_only_by_clients_the_user_approved_until_withdrawn);

async fn a_2026_client_is_asked_for_the_pair_by_round_trip_and_its_retry_reaches_the_server(app: &TestApp) {
    let upstream = Upstream::start(&[], None).await;
    add_open_server(app, "tools", &upstream).await;
    let client = std::sync::Arc::new(app.mcp_client_2026(ALICE, ClientKind::Url).await);

    // The client's call_tool drives the rounds: the link, then the retry that waits.
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.call("tools_echo", json!({"text": "round"})).await }
    });
    let (url, _) = client.next_url_elicitation().await;
    assert!(url.starts_with(&app.url("/connect/")), "the broker's own page: {url}");
    app.allow_in_browser(&app.browser(), &url, ALICE).await;
    let echoed = call.await.unwrap().expect("the server's answer after the browser");
    assert_ne!(echoed.is_error, Some(true), "{echoed:?}");
    assert_eq!(echoed.structured_content.unwrap()["text"], "round");
    upstream.stop().await;
}
on_both_backends!(
    open_server_pair_2026,
    a_2026_client_is_asked_for_the_pair_by_round_trip_and_its_retry_reaches_the_server
);

async fn one_visit_approves_the_pair_and_connects_and_each_further_client_or_server_asks_once(app: &TestApp) {
    // Arrange: a server that takes the user's demo-provider token.
    let upstream = Upstream::bearer(app).await;
    add_provider_server(app, "notes", &upstream).await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;

    // Act: the first call's link connects the account and approves the pair in one visit.
    let (_, url) = url_elicitation_required(client.call("notes_connect", json!({})).await);
    let browser = app.browser();
    let path = url.strip_prefix(&app.address).unwrap();
    assert_eq!(app.sign_in(&browser, ALICE, path).await.status(), 303);
    let page = browser.get(&url).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("Server behind the broker") && page.contains("<strong>notes</strong>"), "{page}");
    assert_eq!(app.approve_in_browser_as(&browser, &url, ALICE, "alice-demo").await.status(), 200);

    // Assert: the call proceeds with no second link.
    assert_ne!(client.call("notes_connect", json!({})).await.unwrap().is_error, Some(true));
    assert_eq!(account_of(&client.call("notes_whoami", json!({})).await.unwrap()), "alice-demo");

    // A second client: the connection exists but this client may neither use it nor call the
    // server; one consent-only visit (no provider) covers both.
    let other_token = app.token_for_client(ALICE, "other-app").await;
    let other = app.mcp_client_with_token(&other_token, ClientKind::Url).await.unwrap();
    let (_, url) = url_elicitation_required(other.call("notes_whoami", json!({})).await);
    let html = app.allow_in_browser(&browser, &url, ALICE).await;
    assert!(html.contains("Server behind the broker"), "{html}");
    assert_eq!(account_of(&other.call("notes_whoami", json!({})).await.unwrap()), "alice-demo");
    other.close().await;

    // A second server on the same provider: connected and allowed, only the pair is asked.
    let second = Upstream::bearer(app).await;
    add_provider_server(app, "notes2", &second).await;
    let (_, url) = url_elicitation_required(client.call("notes2_connect", json!({})).await);
    let html = app.allow_in_browser(&browser, &url, ALICE).await;
    assert!(html.contains("Allow this client to call notes2?"), "{html}");
    assert_ne!(client.call("notes2_connect", json!({})).await.unwrap().is_error, Some(true));
    assert_eq!(account_of(&client.call("notes2_whoami", json!({})).await.unwrap()), "alice-demo");
    assert_eq!(audited(app, ALICE, "gateway.consent.granted").await, 3);

    client.close().await;
    second.stop().await;
    upstream.stop().await;
}
on_both_backends!(
    provider_server_pair,
    one_visit_approves_the_pair_and_connects_and_each_further_client_or_server_asks_once
);
