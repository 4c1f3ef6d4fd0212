//! Gateway mode (issue 26, item 4, "The server's own questions reach the user") across eras: a
//! 2025-11-25 server behind the broker (`examples/upstream_server.rs`, its own process) asks a
//! question mid-call of a 2026-07-28 client, which answers by retrying while the call waits on
//! the broker (a *flight*); and the server's own `-32042`, on a tool call or a `resources/read`,
//! reaches clients of both eras as the server's page.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ElicitRequestParams, ElicitResult, ElicitationAction,
    InputRequest, InputRequiredResult, InputResponses, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, ResourceContents,
};
use serde_json::{Value, json};

use crate::helpers::gateway::{Upstream, approve_pair, asking_server, server_saw};
use crate::helpers::*;
use crate::on_both_backends;

fn params(name: &str, arguments: Value, state: Option<&str>, responses: Option<Value>) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = arguments.as_object().cloned();
    params.request_state = state.map(str::to_owned);
    params.input_responses = responses.map(|r| serde_json::from_value::<InputResponses>(r).expect("input responses"));
    params
}

/// One call, answered with the broker's round: the round and its single request.
async fn one_round(
    client: &McpClient,
    params: CallToolRequestParams,
) -> (InputRequiredResult, String, ElicitRequestParams) {
    let answer = client.peer().call_tool_once(params).await.unwrap();
    let CallToolResponse::InputRequired(round) = answer else { panic!("expected an InputRequiredResult: {answer:?}") };
    let requests = round.input_requests.clone().expect("input requests");
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (key, request) = requests.into_iter().next().unwrap();
    let InputRequest::Elicitation(elicit) = request else { panic!("an elicitation: {request:?}") };
    (round, key, elicit.params)
}

/// The retry's answer, which must be the server's result.
async fn finished(client: &McpClient, params: CallToolRequestParams) -> CallToolResult {
    let answer = client.peer().call_tool_once(params).await.unwrap();
    let CallToolResponse::Complete(result) = answer else { panic!("expected the server's result: {answer:?}") };
    result
}

async fn a_2026_client_answers_a_servers_mid_call_question_by_retrying_and_the_same_call_finishes(app: &TestApp) {
    // Arrange
    let mut upstream = asking_server(app).await;
    let client = app.mcp_client_2026(ALICE, ClientKind::Url).await;
    client.answer_forms([ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": "Alice"}))]);

    // Act: a client that drives the rounds itself.
    let accepted = client.call("crm_ask_name", json!({})).await.unwrap();

    // Assert: asked as the server's question, with the server's form; the server got the
    // content on the call it asked in.
    let (message, schema) = client.next_form_elicitation().await;
    assert!(message.starts_with("The server crm (behind this broker) asks:"), "{message}");
    assert!(message.contains("What should I call you?"), "{message}");
    assert_eq!(schema["required"], json!(["name"]), "{schema}");
    let seen = server_saw(&accepted);
    assert_eq!((seen["action"].as_str(), &seen["content"]), (Some("accept"), &json!({"name": "Alice"})), "{seen}");
    upstream.printed("elicitation answered: accept").await;

    // Act: one round at a time — the broker's round, then a retry that declines.
    let (round, key, asked) = one_round(&client, params("crm_ask_name", json!({}), None, None)).await;
    assert!(matches!(asked, ElicitRequestParams::FormElicitationParams { .. }), "{asked:?}");
    let state = round.request_state.expect("the broker's state");
    assert!(state.starts_with("ob1."), "{state:.20}");
    assert_eq!(app.gateway.flights.len(), 1, "the call waits on the broker");
    let decline = json!({ key.clone(): {"action": "decline"} });
    let declined = finished(&client, params("crm_ask_name", json!({}), Some(&state), Some(decline.clone()))).await;

    // Assert: the decline reached the server, and nothing waits any more.
    assert_eq!(server_saw(&declined)["action"], "decline");
    upstream.printed("elicitation answered: decline").await;
    assert!(app.gateway.flights.is_empty());

    // Assert: the same state again is a replay.
    let replay = client.peer().call_tool_once(params("crm_ask_name", json!({}), Some(&state), Some(decline))).await;
    assert!(matches!(&replay, Err(rmcp::ServiceError::McpError(e)) if e.code.0 == -32602), "{replay:?}");
    client.close().await;
    upstream.stop().await;
}
on_both_backends!(
    mid_call_form,
    a_2026_client_answers_a_servers_mid_call_question_by_retrying_and_the_same_call_finishes
);

async fn a_2026_client_is_asked_two_questions_of_one_call_and_a_url_as_the_servers_page(app: &TestApp) {
    // Arrange
    let upstream = asking_server(app).await;
    let client = app.mcp_client_2026(ALICE, ClientKind::Url).await;
    client.answer_forms([ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": "Ada"}))]);

    // Act: a form, then a page to open, within one call.
    let both = client.call("crm_ask_two", json!({})).await.unwrap();

    // Assert: each answer reached the server within the same call.
    let seen = server_saw(&both);
    assert_eq!(seen["first"]["action"], "accept", "{seen}");
    assert_eq!(seen["first"]["content"], json!({"name": "Ada"}), "{seen}");
    assert_eq!(seen["second"]["action"], "accept", "{seen}");
    let asked = client.drain_elicitations().await;
    assert_eq!(asked.len(), 2, "{asked:?}");
    let ElicitRequestParams::UrlElicitationParams { url, message, elicitation_id, .. } = &asked[1] else {
        panic!("a URL question second: {asked:?}")
    };
    assert_eq!(url, "https://login.vendor.example/two");
    assert!(message.starts_with("The server crm (behind this broker)"), "{message}");
    assert!(message.contains("login.vendor.example") && message.contains("not the broker's"), "{message}");
    assert!(!elicitation_id.starts_with("upstream-"), "the server's id is never shown: {elicitation_id}");

    // Act + Assert: a page the broker would not show is refused to the server, which goes on;
    // the client is not asked.
    let refused = client.call("crm_open_page", json!({"url": "http://login.vendor.example/"})).await.unwrap();
    let error = &server_saw(&refused)["error"];
    assert_eq!(error["code"], -32602, "{error}");
    assert!(error["message"].as_str().unwrap().contains("only https URLs"), "{error}");
    assert!(client.no_elicitation_was_sent().await);
    assert!(app.gateway.flights.is_empty());
    client.close().await;
    upstream.stop().await;
}
on_both_backends!(two_questions, a_2026_client_is_asked_two_questions_of_one_call_and_a_url_as_the_servers_page);

async fn a_retry_with_another_users_or_an_altered_state_never_reaches_the_waiting_call(app: &TestApp) {
    // Arrange: alice's call waits on her answer.
    let mut upstream = asking_server(app).await;
    approve_pair(app, BOB).await;
    let alice = app.mcp_client_2026(ALICE, ClientKind::Url).await;
    let bob = app.mcp_client_2026(BOB, ClientKind::Url).await;
    let (round, key, _) = one_round(&alice, params("crm_ask_name", json!({}), None, None)).await;
    let state = round.request_state.unwrap();
    let answer = |name: &str| json!({ key.clone(): {"action": "accept", "content": {"name": name}} });

    // Act: bob retries with alice's state; alice with an altered one.
    let foreign = bob.peer().call_tool_once(params("crm_ask_name", json!({}), Some(&state), Some(answer("bob")))).await;
    let mut altered = state.clone().into_bytes();
    // Inside the sealed state (the instance's home, after it, is sealed apart: gateway_instances).
    let at = 10;
    altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    let tampered =
        alice.peer().call_tool_once(params("crm_ask_name", json!({}), Some(&altered), Some(answer("eve")))).await;

    // Assert: both refused (-32602), and alice's call still waits for her.
    for refused in [&foreign, &tampered] {
        assert!(matches!(refused, Err(rmcp::ServiceError::McpError(e)) if e.code.0 == -32602), "{refused:?}");
    }
    assert_eq!(app.gateway.flights.len(), 1);
    let done = finished(&alice, params("crm_ask_name", json!({}), Some(&state), Some(answer("alice")))).await;
    assert_eq!(server_saw(&done)["content"], json!({"name": "alice"}));
    upstream.printed("elicitation answered: accept").await;
    alice.close().await;
    bob.close().await;
    upstream.stop().await;
}
on_both_backends!(foreign_state, a_retry_with_another_users_or_an_altered_state_never_reaches_the_waiting_call);

/// An app whose questions wait one second for the client's retry.
async fn spawn_with_short_question_wait(backend: Backend) -> Option<TestApp> {
    let options = SpawnOptions { toml: "[gateway]\nquestion_wait = \"1s\"\n".into(), ..Default::default() };
    spawn_app_opts(backend, options, |builder| builder).await
}

async fn a_question_never_answered_is_cancelled_at_its_wait_and_the_late_retry_is_told_to_call_again(app: &TestApp) {
    // Arrange
    let mut upstream = asking_server(app).await;
    let client = app.mcp_client_2026(ALICE, ClientKind::Url).await;
    let (round, key, _) = one_round(&client, params("crm_ask_name", json!({}), None, None)).await;
    let state = round.request_state.unwrap();

    // Act: the client does not retry within `question_wait`.
    eventually("the unanswered question leaves the table", Duration::from_secs(20), || async {
        app.gateway.flights.is_empty()
    })
    .await;

    // Assert: the server heard `cancel`; the late retry gets an isError saying to call again.
    upstream.printed("elicitation answered: cancel").await;
    let answer = json!({ key: {"action": "accept", "content": {"name": "late"}} });
    let late = finished(&client, params("crm_ask_name", json!({}), Some(&state), Some(answer))).await;
    assert_eq!(late.is_error, Some(true), "{late:?}");
    assert_eq!(late.structured_content, Some(json!({"error": "question_expired", "server": "crm"})));
    let text = serde_json::to_string(&late.content).unwrap();
    assert!(text.contains("call the tool again"), "{text}");
    assert!(app.gateway.flights.is_empty());
    client.close().await;
    upstream.stop().await;
}

mod expired_flight {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        let app = spawn_with_short_question_wait(Backend::Sqlite).await.unwrap();
        a_question_never_answered_is_cancelled_at_its_wait_and_the_late_retry_is_told_to_call_again(&app).await;
        app.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        let Some(app) = spawn_with_short_question_wait(Backend::Postgres).await else { return };
        a_question_never_answered_is_cancelled_at_its_wait_and_the_late_retry_is_told_to_call_again(&app).await;
        app.stop().await;
    }
}

/// The one page of a relayed `-32042`: (elicitationId, url, message), and the error's data.
fn relayed_page(result: Result<CallToolResult, rmcp::ServiceError>) -> (String, String, String, Value) {
    let Err(rmcp::ServiceError::McpError(error)) = result else { panic!("expected -32042: {result:?}") };
    assert_eq!(error.code.0, -32042, "{error:?}");
    let data = error.data.expect("elicitations in data");
    let page = &data["elicitations"][0];
    assert_eq!(page["mode"], "url", "{data}");
    let text = |field: &str| page[field].as_str().unwrap_or_default().to_owned();
    (text("elicitationId"), text("url"), text("message"), data)
}

async fn a_servers_own_url_elicitation_required_reaches_a_2025_client_as_the_servers_page(app: &TestApp) {
    // Arrange
    let upstream: Upstream = asking_server(app).await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let page = "https://login.vendor.example/consent";

    // Act
    let first = client.call("crm_needs_page", json!({"url": page})).await;

    // Assert: -32042 with the server's URL unchanged, worded as the server's page, under an
    // id of the broker's.
    let (id, url, message, data) = relayed_page(first);
    assert_eq!(url, page);
    assert!(message.starts_with("The server crm (behind this broker)"), "{message}");
    assert!(message.contains("login.vendor.example") && message.contains("not the broker's"), "{message}");
    assert!(!id.is_empty() && !id.starts_with("upstream-page-"), "the broker's own id: {id}");
    assert_eq!(data["server"], "crm", "{data}");

    // Act: the page is done on the server's side.
    let completed = client.call("crm_complete_pages", json!({})).await.unwrap();
    assert_eq!(server_saw(&completed)["completed"], 1);

    // Assert: the completion reached the client under the broker's id; calling again works.
    assert_eq!(client.next_completion(Duration::from_secs(10)).await.as_deref(), Some(id.as_str()));
    let again = client.call("crm_needs_page", json!({"url": page})).await.unwrap();
    assert_eq!(server_saw(&again)["opened"], page);

    // Act + Assert: a page the broker would not show ends the call with an isError naming the
    // server, and no link.
    let unsafe_page = client.call("crm_needs_page", json!({"url": "http://vendor.example/x"})).await.unwrap();
    assert_eq!(unsafe_page.is_error, Some(true), "{unsafe_page:?}");
    let structured = unsafe_page.structured_content.unwrap();
    assert_eq!(
        (structured["error"].as_str(), structured["server"].as_str()),
        (Some("question_not_relayable"), Some("crm"))
    );
    client.close().await;
    upstream.stop().await;
}
on_both_backends!(server_link_2025, a_servers_own_url_elicitation_required_reaches_a_2025_client_as_the_servers_page);

async fn a_servers_own_url_elicitation_required_reaches_a_2026_client_as_a_round_and_the_retry_calls_again(
    app: &TestApp,
) {
    // Arrange
    let upstream = asking_server(app).await;
    let client = app.mcp_client_2026(ALICE, ClientKind::Url).await;
    let page = "https://login.vendor.example/round";

    // Act
    let (round, key, asked) = one_round(&client, params("crm_needs_page", json!({"url": page}), None, None)).await;

    // Assert: the server's page as a URL request of the broker's round, named as the server's.
    let ElicitRequestParams::UrlElicitationParams { url, message, .. } = asked else { panic!("{asked:?}") };
    assert_eq!(url, page);
    assert!(message.starts_with("The server crm (behind this broker)") && message.contains("not the broker's"));
    let state = round.request_state.unwrap();

    // Act: the user opens the page (done on the server's side), then the client retries.
    let completed = client.call("crm_complete_pages", json!({})).await.unwrap();
    assert_eq!(server_saw(&completed)["completed"], 1);
    let answer = json!({ key: {"action": "accept"} });
    let done = finished(&client, params("crm_needs_page", json!({"url": page}), Some(&state), Some(answer))).await;

    // Assert: the retry was sent to the server again, which now answers.
    assert_eq!(server_saw(&done)["opened"], page);
    client.close().await;
    upstream.stop().await;
}
on_both_backends!(
    server_link_2026,
    a_servers_own_url_elicitation_required_reaches_a_2026_client_as_a_round_and_the_retry_calls_again
);

/// The server's `note://vendor`, read through the broker: it needs a page of its own first.
const VENDOR_NOTE: &str = "gateway://crm/note://vendor";

fn read_params(state: Option<&str>, responses: Option<Value>) -> ReadResourceRequestParams {
    let mut params = ReadResourceRequestParams::new(VENDOR_NOTE);
    params.request_state = state.map(str::to_owned);
    params.input_responses = responses.map(|r| serde_json::from_value::<InputResponses>(r).expect("input responses"));
    params
}

fn text_of(result: &ReadResourceResult) -> (String, String) {
    match &result.contents[..] {
        [ResourceContents::TextResourceContents { uri, text, .. }] => (uri.clone(), text.clone()),
        other => panic!("one text content expected: {other:?}"),
    }
}

async fn a_servers_own_url_elicitation_required_on_a_read_reaches_a_2025_client_as_the_servers_page(app: &TestApp) {
    // Arrange
    let upstream = asking_server(app).await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;

    // Act
    let first = client.peer().read_resource(read_params(None, None)).await;

    // Assert: -32042 with the server's URL unchanged, worded as the server's page, under an id
    // of the broker's — as for a tool call.
    let Err(rmcp::ServiceError::McpError(error)) = first else { panic!("expected -32042: {first:?}") };
    assert_eq!(error.code.0, -32042, "{error:?}");
    let data = error.data.expect("elicitations in data");
    let page = &data["elicitations"][0];
    assert_eq!(page["url"], "https://vendor.example/notes", "{data}");
    let message = page["message"].as_str().unwrap();
    assert!(message.starts_with("The server crm (behind this broker)") && message.contains("not the broker's"));
    let id = page["elicitationId"].as_str().unwrap().to_owned();
    assert!(!id.starts_with("upstream-page-"), "the broker's own id: {id}");

    // Act: the page is done on the server's side.
    let completed = client.call("crm_complete_pages", json!({})).await.unwrap();
    assert_eq!(server_saw(&completed)["completed"], 1);

    // Assert: the completion reached the client under the broker's id; reading again works.
    assert_eq!(client.next_completion(Duration::from_secs(10)).await.as_deref(), Some(id.as_str()));
    let read = client.peer().read_resource(read_params(None, None)).await.unwrap();
    assert_eq!(text_of(&read), (VENDOR_NOTE.to_owned(), "The vendor's note.".to_owned()));
    client.close().await;
    upstream.stop().await;
}
on_both_backends!(
    server_link_on_read_2025,
    a_servers_own_url_elicitation_required_on_a_read_reaches_a_2025_client_as_the_servers_page
);

async fn a_servers_own_url_elicitation_required_on_a_read_reaches_a_2026_client_as_a_round(app: &TestApp) {
    // Arrange
    let upstream = asking_server(app).await;
    let client = app.mcp_client_2026(ALICE, ClientKind::Url).await;

    // Act
    let first = client.peer().read_resource_once(read_params(None, None)).await.unwrap();

    // Assert: the server's page as a URL request of the broker's round, named as the server's.
    let ReadResourceResponse::InputRequired(round) = first else { panic!("expected a round: {first:?}") };
    let requests = round.input_requests.clone().expect("input requests");
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (key, request) = requests.into_iter().next().unwrap();
    let InputRequest::Elicitation(elicit) = request else { panic!("an elicitation: {request:?}") };
    let ElicitRequestParams::UrlElicitationParams { url, message, .. } = elicit.params else { panic!("a URL") };
    assert_eq!(url, "https://vendor.example/notes");
    assert!(message.starts_with("The server crm (behind this broker)") && message.contains("not the broker's"));
    let state = round.request_state.expect("the broker's state");

    // Act + Assert: the state is bound to this read; a tool call cannot carry it.
    let answer = json!({ key.clone(): {"action": "accept"} });
    let elsewhere = client
        .peer()
        .call_tool_once(params("crm_echo", json!({"text": "x"}), Some(&state), Some(answer.clone())))
        .await;
    assert!(matches!(&elsewhere, Err(rmcp::ServiceError::McpError(e)) if e.code.0 == -32602), "{elsewhere:?}");

    // Act: the user opens the page (done on the server's side), then the client retries.
    let completed = client.call("crm_complete_pages", json!({})).await.unwrap();
    assert_eq!(server_saw(&completed)["completed"], 1);
    let retry = client.peer().read_resource_once(read_params(Some(&state), Some(answer))).await.unwrap();

    // Assert: the retry was sent to the server again, which now answers.
    let ReadResourceResponse::Complete(read) = retry else { panic!("expected the contents: {retry:?}") };
    assert_eq!(text_of(&read), (VENDOR_NOTE.to_owned(), "The vendor's note.".to_owned()));
    client.close().await;
    upstream.stop().await;
}
on_both_backends!(
    server_link_on_read_2026,
    a_servers_own_url_elicitation_required_on_a_read_reaches_a_2026_client_as_a_round
);
