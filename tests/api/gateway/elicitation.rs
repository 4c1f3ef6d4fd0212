//! Gateway mode (issue 26, "The server's own questions reach the user"): a server behind the
//! broker (`examples/upstream_server.rs`, its own process) asks a form question and a URL
//! elicitation during a call; a real rmcp client answers what the broker relays.

use std::time::Duration;

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::json;

use crate::helpers::gateway::{approve_pair, asking_server, server_saw};
use crate::helpers::*;
use crate::on_both_backends;

async fn a_servers_form_question_reaches_the_client_and_each_answer_goes_back(app: &TestApp) {
    // Arrange
    let upstream = asking_server(app).await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    client.answer_forms([
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": "Alice"})),
        ElicitResult::new(ElicitationAction::Decline),
        ElicitResult::new(ElicitationAction::Cancel),
    ]);

    // Act: the call asks; the client accepts with content.
    let accepted = client.call("crm_ask_name", json!({})).await.unwrap();

    // Assert: the client was asked on its own call, told which server asks, with the server's
    // form; the server got the content as given.
    let (message, schema) = client.next_form_elicitation().await;
    assert!(message.starts_with("The server crm (behind this broker) asks:"), "{message}");
    assert!(message.contains("What should I call you?"), "{message}");
    assert_eq!(schema["properties"]["name"]["type"], "string", "{schema}");
    assert_eq!(schema["required"], json!(["name"]), "{schema}");
    let seen = server_saw(&accepted);
    assert_eq!(seen["action"], "accept");
    assert_eq!(seen["content"], json!({"name": "Alice"}));

    // Decline and cancel go back as the client gave them.
    let declined = client.call("crm_ask_name", json!({})).await.unwrap();
    assert_eq!(server_saw(&declined)["action"], "decline");
    let cancelled = client.call("crm_ask_name", json!({})).await.unwrap();
    assert_eq!(server_saw(&cancelled)["action"], "cancel");
    client.close().await;
    upstream.stop().await;
}
on_both_backends!(form, a_servers_form_question_reaches_the_client_and_each_answer_goes_back);

async fn a_servers_url_elicitation_names_the_server_and_its_completion_reaches_the_client(app: &TestApp) {
    // Arrange
    let mut upstream = asking_server(app).await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;

    // Act: the server asks the user to open its page; the client accepts.
    let page = "https://login.vendor.example/start?step=1";
    let opened = client.call("crm_open_page", json!({"url": page})).await.unwrap();

    // Assert: the URL unchanged, the message naming the server and its page's host, never
    // the broker's; the id the client got is the broker's, not the server's.
    let asked = client.next_elicitation().await;
    let ElicitRequestParams::UrlElicitationParams { message, url, elicitation_id, .. } = asked else {
        panic!("a URL elicitation, got {asked:?}")
    };
    assert_eq!(url, page);
    assert!(message.starts_with("The server crm (behind this broker)"), "{message}");
    assert!(message.contains("login.vendor.example") && message.contains("not the broker's"), "{message}");
    assert!(message.contains("Sign in to the vendor"), "{message}");
    let seen = server_saw(&opened);
    assert_eq!(seen["action"], "accept");
    let theirs = seen["elicitationId"].as_str().unwrap();
    assert_ne!(elicitation_id, theirs, "the server's id is never shown to the client");

    // The server's completion reaches the client under the id the client knows.
    let completed = client.next_completion(Duration::from_secs(10)).await;
    assert_eq!(completed.as_deref(), Some(elicitation_id.as_str()));

    // A plain-http page elsewhere is refused to the server; the client is never asked.
    let refused = client.call("crm_open_page", json!({"url": "http://login.vendor.example/start"})).await.unwrap();
    let error = &server_saw(&refused)["error"];
    assert_eq!(error["code"], -32602, "{error}");
    assert!(error["message"].as_str().unwrap().contains("only https URLs"), "{error}");
    upstream.printed("elicitation refused: the broker did not relay the URL: only https URLs (or http to a loopback address) are relayed").await;
    assert!(client.no_elicitation_was_sent().await, "the client was not shown the refused URL");

    // http to a loopback address (a local tool's page) is relayed.
    let local = client.call("crm_open_page", json!({"url": "http://127.0.0.1:9/done"})).await.unwrap();
    assert_eq!(server_saw(&local)["action"], "accept");
    client.close().await;
    upstream.stop().await;
}
on_both_backends!(url, a_servers_url_elicitation_names_the_server_and_its_completion_reaches_the_client);

async fn a_client_without_the_mode_is_never_asked_and_the_server_hears_why(app: &TestApp) {
    // Arrange
    let mut upstream = asking_server(app).await;
    let plain = app.mcp_client(ALICE, ClientKind::NoElicitation).await;
    let forms_only = app.mcp_client(ALICE, ClientKind::FormOnly).await;

    // Act
    let form = plain.call("crm_ask_name", json!({})).await.unwrap();
    let link = forms_only.call("crm_open_page", json!({"url": "https://login.vendor.example/"})).await.unwrap();

    // Assert: -32602 for a mode the client did not declare (MCP 2025-11-25 client/elicitation).
    let error = &server_saw(&form)["error"];
    assert_eq!(error["code"], -32602, "{error}");
    assert!(error["message"].as_str().unwrap().contains("did not declare form elicitation"), "{error}");
    upstream
        .printed(
            "elicitation refused: the user's client did not declare form elicitation; the broker cannot ask it for crm",
        )
        .await;
    let error = &server_saw(&link)["error"];
    assert_eq!(error["code"], -32602, "{error}");
    assert!(error["message"].as_str().unwrap().contains("did not declare URL elicitation"), "{error}");
    assert!(plain.no_elicitation_was_sent().await && forms_only.no_elicitation_was_sent().await);
    plain.close().await;
    forms_only.close().await;
    upstream.stop().await;
}
on_both_backends!(undeclared_mode, a_client_without_the_mode_is_never_asked_and_the_server_hears_why);

async fn two_users_asked_at_once_each_answer_only_their_own_question(app: &TestApp) {
    // Arrange: alice and bob call the same server at once, several times each.
    let upstream = asking_server(app).await;
    approve_pair(app, BOB).await;
    let alice = app.mcp_client(ALICE, ClientKind::Url).await;
    let bob = app.mcp_client(BOB, ClientKind::Url).await;
    const CALLS_EACH: usize = 5;
    let answer = |name: &str| ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": name}));
    alice.answer_forms((0..CALLS_EACH).map(|_| answer("alice")));
    bob.answer_forms((0..CALLS_EACH).map(|_| answer("bob")));

    // Act
    let calls = (0..CALLS_EACH)
        .flat_map(|_| [(&alice, "alice"), (&bob, "bob")])
        .map(|(client, name)| async move { (name, client.call("crm_ask_name", json!({})).await.unwrap()) });
    let results = futures::future::join_all(calls).await;

    // Assert: every call carried its own user's answer, and each client was asked only its own
    // questions.
    for (name, result) in &results {
        assert_eq!(server_saw(result)["content"]["name"], *name, "a question reached another user's client");
    }
    assert_eq!(alice.drain_elicitations().await.len(), CALLS_EACH);
    assert_eq!(bob.drain_elicitations().await.len(), CALLS_EACH);
    alice.close().await;
    bob.close().await;
    upstream.stop().await;
}
on_both_backends!(per_user, two_users_asked_at_once_each_answer_only_their_own_question);

async fn a_2026_client_without_forms_is_never_asked_and_the_server_hears_why(app: &TestApp) {
    // Arrange: a 2026-07-28 client that declared no elicitation (the rounds of one that did:
    // `gateway_round_trips`).
    let mut upstream = asking_server(app).await;
    let client = app.mcp_client_2026(ALICE, ClientKind::NoElicitation).await;

    // Act
    let result = client.call("crm_ask_name", json!({})).await.unwrap();

    // Assert: -32602 for the server, as for a 2025-11-25 session; nothing waits on the broker.
    let error = &server_saw(&result)["error"];
    assert_eq!(error["code"], -32602, "{error}");
    assert!(error["message"].as_str().unwrap().contains("did not declare form elicitation"), "{error}");
    upstream
        .printed(
            "elicitation refused: the user's client did not declare form elicitation; the broker cannot ask it for crm",
        )
        .await;
    assert!(client.no_elicitation_was_sent().await);
    assert!(app.gateway.flights.is_empty());
    client.close().await;
    upstream.stop().await;
}
on_both_backends!(era_2026, a_2026_client_without_forms_is_never_asked_and_the_server_hears_why);
