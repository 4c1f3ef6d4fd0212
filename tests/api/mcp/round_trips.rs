//! MCP 2026-07-28 multi round-trip requests (SEP-2322) end to end: a tool that needs the user
//! answers an `InputRequiredResult` (a url-mode elicitation to the broker's own page, or a form)
//! and a sealed `requestState`; the client's retry carries the answer and the state, and waits
//! for the browser. Driven by rmcp's own client (whose `call_tool` runs the rounds through its
//! elicitation handler) and, where a test must tamper, by plain HTTP.

use rmcp::model::{ElicitResult, ElicitationAction};
use serde_json::{Value, json};

use crate::helpers::round_trips::{ME, URL_AND_FORMS, answer_in, link_and_state, request_2026};
use crate::helpers::*;
use crate::on_both_backends;

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n")
}

/// One MCP 2026-07-28 `tools/call` over plain HTTP: no session; `_meta` names the revision, the
/// client and its `capabilities`. `retry`: the `inputResponses` and `requestState` to send back.
/// The JSON-RPC answer.
async fn call_2026(
    app: &TestApp,
    token: &str,
    tool: &str,
    arguments: Value,
    capabilities: Value,
    retry: Option<(Value, &str)>,
) -> Value {
    let response = request_2026(app, token, tool, arguments, capabilities, retry, None).send().await.unwrap();
    assert!(response.headers().get("mcp-session-id").is_none(), "no session in this revision");
    answer_in(&response.text().await.unwrap()).unwrap_or_else(|| panic!("an answer"))
}

fn accepted() -> Value {
    json!({"authorize": {"action": "accept"}})
}

fn assert_refused(answer: &Value, what: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{what}: {answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("requestState is not valid"), "{what}: {message}");
}

async fn authorization_status(app: &TestApp, url: &str) -> String {
    let id = url.rsplit('/').next().unwrap();
    app.state.core.store.authorizations().by_id(id).await.unwrap().unwrap().status.as_str().to_owned()
}

async fn rmcp_client_gets_the_providers_answer_after_the_browser(app: &TestApp) {
    let client = std::sync::Arc::new(app.mcp_client_2026(ALICE, ClientKind::Url).await);
    // The client's call_tool runs the rounds: the link, then the retry that waits.
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.call("provider_request", ME()).await }
    });
    let (url, elicitation_id) = client.next_url_elicitation().await;
    assert!(url.starts_with(&app.url("/connect/")), "the broker's own page: {url}");
    assert_eq!(elicitation_id, "", "2026-07-28 has no elicitationId");
    let browser = app.browser();
    assert_eq!(app.approve_in_browser(&browser, &url, ALICE).await.status(), 200);
    let answer = call.await.unwrap().expect("the provider's answer, not an error");
    assert_eq!(answer.structured_content.unwrap()["status"], 200);
    assert!(client.drain_elicitations().await.is_empty(), "one link, asked once");

    // Connected now: the next call answers at once, with no round trip.
    let again = client.call("provider_request", ME()).await.unwrap();
    assert_eq!(again.structured_content.unwrap()["status"], 200);
    assert!(client.no_elicitation_was_sent().await);
}
on_both_backends!(rmcp_client_flow, rmcp_client_gets_the_providers_answer_after_the_browser);

async fn connect_account_asks_its_scopes_form_by_round_trip(app: &TestApp) {
    let client = std::sync::Arc::new(app.mcp_client_2026(ALICE, ClientKind::Url).await);
    client.answer_forms([
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"scopes": ["profile", "notes:write"]}))
    ]);
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.call("connect_account", json!({"provider": "demo"})).await }
    });
    let (message, schema) = client.next_form_elicitation().await;
    assert!(message.contains("Demo Provider"), "{message}");
    assert_eq!(schema["properties"]["scopes"]["type"], "array", "the scopes question: {schema}");
    let (url, _) = client.next_url_elicitation().await;
    let browser = app.browser();
    assert_eq!(app.approve_in_browser(&browser, &url, ALICE).await.status(), 200);
    let connected = call.await.unwrap().unwrap();
    assert_ne!(connected.is_error, Some(true), "{}", text_of(&connected));
    let user = app.user_id(ALICE).await;
    let grants = app.state.core.store.grants().at(&user, "demo").await.unwrap();
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].scopes.to_space_separated(), "notes:write profile", "the scopes the user chose");
}
on_both_backends!(scopes_form, connect_account_asks_its_scopes_form_by_round_trip);

async fn a_bad_form_answer_is_asked_again_with_the_reason(app: &TestApp) {
    let alice = app.token_for(ALICE).await;
    let args = json!({"provider": "demo"});
    let first = call_2026(app, &alice, "connect_account", args.clone(), URL_AND_FORMS(), None).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let form = &first["result"]["inputRequests"]["question"]["params"];
    assert_eq!(form["mode"], "form", "{first}");
    let state = first["result"]["requestState"].as_str().unwrap();
    // A scope that was not offered.
    let bad = json!({"question": {"action": "accept", "content": {"scopes": ["admin"]}}});
    let again = call_2026(app, &alice, "connect_account", args.clone(), URL_AND_FORMS(), Some((bad, state))).await;
    let asked = &again["result"]["inputRequests"]["question"]["params"];
    assert_eq!(asked["mode"], "form", "asked again: {again}");
    assert!(asked["message"].as_str().unwrap().contains("could not be used"), "with the reason: {again}");
    let authorizations = app.state.core.store.authorizations().all(100).await.unwrap();
    assert!(authorizations.is_empty(), "nothing was opened for a bad answer");
    // The good answer, under the new state: now the link.
    let state = again["result"]["requestState"].as_str().unwrap();
    let good = json!({"question": {"action": "accept", "content": {"scopes": ["profile"]}}});
    let linked = call_2026(app, &alice, "connect_account", args, URL_AND_FORMS(), Some((good, state))).await;
    link_and_state(&linked);
}
on_both_backends!(form_asked_again, a_bad_form_answer_is_asked_again_with_the_reason);

async fn a_request_state_that_does_not_fit_is_refused_and_changes_nothing(app: &TestApp) {
    let alice = app.token_for(ALICE).await;
    let bob = app.token_for(BOB).await;
    let first = call_2026(app, &alice, "provider_request", ME(), URL_AND_FORMS(), None).await;
    let (url, state) = link_and_state(&first);

    // Tampered: one character changed.
    let mut chars: Vec<char> = state.chars().collect();
    let middle = chars.len() / 2;
    chars[middle] = if chars[middle] == 'A' { 'B' } else { 'A' };
    let tampered: String = chars.into_iter().collect();
    let answer = call_2026(app, &alice, "provider_request", ME(), URL_AND_FORMS(), Some((accepted(), &tampered))).await;
    assert_refused(&answer, "tampered");
    // Forged: not one of ours at all.
    let answer = call_2026(app, &alice, "provider_request", ME(), URL_AND_FORMS(), Some((accepted(), "forged"))).await;
    assert_refused(&answer, "forged");
    // Another user's: Bob replays Alice's state on the same call; nothing says it was hers.
    let answer = call_2026(app, &bob, "provider_request", ME(), URL_AND_FORMS(), Some((accepted(), &state))).await;
    assert_refused(&answer, "another user's");
    assert!(!answer.to_string().contains(&app.user_id(ALICE).await), "never says whose: {answer}");
    // Other arguments, another tool.
    let other = json!({"provider": "demo", "method": "DELETE", "path": "/me"});
    let answer = call_2026(app, &alice, "provider_request", other, URL_AND_FORMS(), Some((accepted(), &state))).await;
    assert_refused(&answer, "other arguments");
    let answer =
        call_2026(app, &alice, "list_connections", json!({}), URL_AND_FORMS(), Some((accepted(), &state))).await;
    assert_refused(&answer, "another tool");
    // None of that touched the authorization.
    assert_eq!(authorization_status(app, &url).await, "pending");

    // Expired: the state lives as long as the link.
    app.clock.advance(app.state.core.config.authorization_ttl.as_secs() as i64 + 1);
    let answer = call_2026(app, &alice, "provider_request", ME(), URL_AND_FORMS(), Some((accepted(), &state))).await;
    assert_refused(&answer, "expired");
}
on_both_backends!(refusals, a_request_state_that_does_not_fit_is_refused_and_changes_nothing);

async fn a_decline_ends_it_at_once(app: &TestApp) {
    let alice = app.token_for(ALICE).await;
    let first = call_2026(app, &alice, "provider_request", ME(), URL_AND_FORMS(), None).await;
    let (url, state) = link_and_state(&first);
    let declined = json!({"authorize": {"action": "decline"}});
    let answer = call_2026(app, &alice, "provider_request", ME(), URL_AND_FORMS(), Some((declined, &state))).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap().contains("declined"), "{answer}");
    assert_eq!(authorization_status(app, &url).await, "declined");
    // The page says so too: the link is spent.
    let browser = app.browser();
    app.sign_in(&browser, ALICE, "/").await;
    let page = browser.get(&url).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("You declined this request"), "the link is spent: {page}");
    assert!(!page.contains("value=\"approve\""), "no approve button on a declined link");
}
on_both_backends!(decline, a_decline_ends_it_at_once);

async fn app_with_short_wait(backend: Backend) -> Option<TestApp> {
    let options = SpawnOptions { toml: "mrtr_wait = \"300ms\"\n".into(), ..Default::default() };
    spawn_app_opts(backend, options, |builder| builder).await
}

async fn a_retry_while_the_user_is_still_in_the_browser_gets_the_same_state_back(backend: Backend) {
    let Some(app) = app_with_short_wait(backend).await else { return };
    let alice = app.token_for(ALICE).await;
    let first = call_2026(&app, &alice, "provider_request", ME(), URL_AND_FORMS(), None).await;
    let (url, state) = link_and_state(&first);
    // Nobody opened the link yet: after `mrtr_wait`, "still waiting", with no new link.
    let waiting = call_2026(&app, &alice, "provider_request", ME(), URL_AND_FORMS(), Some((accepted(), &state))).await;
    assert_eq!(waiting["result"]["resultType"], "input_required", "{waiting}");
    assert!(waiting["result"].get("inputRequests").is_none(), "no second link while the first is open: {waiting}");
    assert_eq!(waiting["result"]["requestState"], state.as_str(), "the same state again");
    // The user finishes; the next retry (with no responses, as a driver retries on state
    // alone) gets the provider's answer.
    let browser = app.browser();
    assert_eq!(app.approve_in_browser(&browser, &url, ALICE).await.status(), 200);
    let done = call_2026(&app, &alice, "provider_request", ME(), URL_AND_FORMS(), Some((json!({}), &state))).await;
    assert_eq!(done["result"]["structuredContent"]["status"], 200, "{done}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn still_waiting_on_sqlite() {
    a_retry_while_the_user_is_still_in_the_browser_gets_the_same_state_back(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn still_waiting_on_postgres() {
    a_retry_while_the_user_is_still_in_the_browser_gets_the_same_state_back(Backend::Postgres).await;
}

async fn a_link_that_expires_while_the_retry_waits_ends_it(app: &TestApp) {
    let alice = app.token_for(ALICE).await;
    let first = call_2026(app, &alice, "provider_request", ME(), URL_AND_FORMS(), None).await;
    let (_, state) = link_and_state(&first);
    // The retry asks for progress, so the test knows when it is waiting: the first progress
    // notification arrives while the broker waits for the browser.
    let retry = Some((accepted(), state.as_str()));
    let mut response =
        request_2026(app, &alice, "provider_request", ME(), URL_AND_FORMS(), retry, Some("wait")).send().await.unwrap();
    let mut seen = String::new();
    while !seen.contains("notifications/progress") {
        let chunk = response.chunk().await.unwrap().expect("the stream goes on while the retry waits");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    // Then the link outlives its time.
    app.clock.advance(app.state.core.config.authorization_ttl.as_secs() as i64 + 1);
    while answer_in(&seen).is_none() {
        let chunk = response.chunk().await.unwrap().expect("an answer before the stream ends");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let answer = answer_in(&seen).unwrap();
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap().contains("expired"), "{answer}");
}
on_both_backends!(expiry_while_waiting, a_link_that_expires_while_the_retry_waits_ends_it);

async fn a_question_answered_once_cannot_be_replayed(app: &TestApp) {
    let client = app.connected_client(ALICE).await;
    client.close().await;
    let alice = app.token_for(ALICE).await;
    let args = json!({"provider": "demo"});
    let forms_only = json!({"elicitation": {"form": {}}});
    let first = call_2026(app, &alice, "disconnect_account", args.clone(), forms_only.clone(), None).await;
    let question = &first["result"]["inputRequests"]["question"]["params"];
    assert_eq!(question["mode"], "form", "a confirmation: {first}");
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let confirm = json!({"question": {"action": "accept", "content": {"confirm": true}}});
    let done =
        call_2026(app, &alice, "disconnect_account", args.clone(), forms_only.clone(), Some((confirm.clone(), &state)))
            .await;
    assert_ne!(done["result"]["isError"], true, "{done}");
    assert!(done["result"]["content"][0]["text"].as_str().unwrap().contains("Disconnected"), "{done}");
    // The same retry again: the state was spent.
    let replayed = call_2026(app, &alice, "disconnect_account", args, forms_only, Some((confirm, &state))).await;
    assert_refused(&replayed, "replayed");
}
on_both_backends!(replay, a_question_answered_once_cannot_be_replayed);

async fn clients_without_url_mode_get_the_link_as_text_and_never_a_round_trip(app: &TestApp) {
    let alice = app.token_for(ALICE).await;
    let answer = call_2026(app, &alice, "provider_request", ME(), json!({}), None).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(answer["result"].get("resultType").is_none_or(|t| t == "complete"), "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(&app.url("/connect/")), "the link as text: {text}");
}
on_both_backends!(no_url_mode, clients_without_url_mode_get_the_link_as_text_and_never_a_round_trip);

async fn a_stop_answers_a_waiting_retry_at_once_with_the_same_state(app: &TestApp) {
    let alice = app.token_for(ALICE).await;
    let first = call_2026(app, &alice, "provider_request", ME(), URL_AND_FORMS(), None).await;
    let (url, state) = link_and_state(&first);
    let retry = Some((accepted(), state.as_str()));
    let mut response =
        request_2026(app, &alice, "provider_request", ME(), URL_AND_FORMS(), retry, Some("wait")).send().await.unwrap();
    let mut seen = String::new();
    while !seen.contains("notifications/progress") {
        let chunk = response.chunk().await.unwrap().expect("the stream goes on while the retry waits");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    // The stop begins: the retry (waiting up to 30 s) answers now, so the client retries, to
    // another instance; the link stays valid.
    app.state.draining.cancel();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        while answer_in(&seen).is_none() {
            let chunk = response.chunk().await.unwrap().expect("an answer before the stream ends");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        answer_in(&seen).unwrap()
    })
    .await
    .expect("answered when the stop began");
    assert_eq!(answer["result"]["resultType"], "input_required", "{answer}");
    assert_eq!(answer["result"]["requestState"], state.as_str(), "the same state, for the next instance");
    assert_eq!(authorization_status(app, &url).await, "pending");
}
on_both_backends!(stop_while_waiting, a_stop_answers_a_waiting_retry_at_once_with_the_same_state);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_tool_needing_a_connection_gets_the_round_trip_too() {
    let app = spawn_app_with(Backend::Sqlite, |builder| builder.extension(crate::helpers::demo_tool::DemoTool))
        .await
        .unwrap();
    let client = std::sync::Arc::new(app.mcp_client_2026(ALICE, ClientKind::Url).await);
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.call("demo_account_name", json!({})).await }
    });
    let (url, _) = client.next_url_elicitation().await;
    assert_eq!(app.approve_in_browser(&app.browser(), &url, ALICE).await.status(), 200);
    // The retry waited for the browser, then ran the extension's tool again, now with a token.
    let named = call.await.unwrap().expect("the extension's answer");
    assert_eq!(named.content[0].as_text().unwrap().text, "demo-user");
    app.stop().await;
}
