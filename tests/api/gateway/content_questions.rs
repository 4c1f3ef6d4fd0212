//! Gateway mode (issue 26, item 4, "The server's own questions reach the user") on requests that
//! are not tool calls: a 2025-11-25 server behind the broker (`examples/upstream_server.rs`, its
//! own process) asks a form question while a prompt is got (`introduce`) or a resource read
//! (`note://asked`). A 2025-11-25 client is asked on its request's stream; a 2026-07-28 client
//! gets the broker's round while the request waits on the broker (a *flight*), and its retry
//! finishes that same request.

use std::time::Duration;

use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    InputRequest, InputRequiredResult, InputResponses, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, ResourceContents,
};
use serde_json::{Value, json};

use crate::helpers::gateway::asking_server;
use crate::helpers::*;
use crate::on_both_backends;

const PROMPT: &str = "crm_introduce";
const ASKED_NOTE: &str = "gateway://crm/note://asked";

fn accept(name: &str) -> ElicitResult {
    ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": name}))
}

fn responses(value: Value) -> InputResponses {
    serde_json::from_value(value).expect("input responses")
}

fn prompt_params(state: Option<&str>, answers: Option<Value>) -> GetPromptRequestParams {
    let mut params = GetPromptRequestParams::new(PROMPT);
    params.request_state = state.map(str::to_owned);
    params.input_responses = answers.map(responses);
    params
}

fn read_params(state: Option<&str>, answers: Option<Value>) -> ReadResourceRequestParams {
    let mut params = ReadResourceRequestParams::new(ASKED_NOTE);
    params.request_state = state.map(str::to_owned);
    params.input_responses = answers.map(responses);
    params
}

fn prompt_text(result: &GetPromptResult) -> String {
    serde_json::to_value(&result.messages).unwrap()[0]["content"]["text"].as_str().unwrap().to_owned()
}

fn read_text(result: &ReadResourceResult) -> String {
    match &result.contents[..] {
        [ResourceContents::TextResourceContents { uri, text, .. }] => {
            assert_eq!(uri, ASKED_NOTE, "the contents name the URI the client knows");
            text.clone()
        }
        other => panic!("one text content expected: {other:?}"),
    }
}

/// The server's prompts are listed by the broker (the gateway caches each server's lists).
async fn introduce_is_listed(client: &McpClient) {
    eventually("the server's prompts are listed", Duration::from_secs(10), || async {
        let listed = client.peer().list_all_prompts().await.unwrap_or_default();
        listed.iter().any(|p| p.name == PROMPT)
    })
    .await;
}

/// The round's one request: its key and the question as the client is shown it.
fn only_request(round: &InputRequiredResult) -> (String, ElicitRequestParams) {
    let requests = round.input_requests.clone().expect("input requests");
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (key, request) = requests.into_iter().next().unwrap();
    let InputRequest::Elicitation(elicit) = request else { panic!("an elicitation: {request:?}") };
    (key, elicit.params)
}

fn assert_the_servers_form(asked: &ElicitRequestParams) {
    let ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } = asked else {
        panic!("a form question: {asked:?}")
    };
    assert!(message.starts_with("The server crm (behind this broker) asks:"), "{message}");
    assert!(message.contains("What should I call you?"), "{message}");
    let schema = serde_json::to_value(requested_schema).unwrap();
    assert_eq!(schema["required"], json!(["name"]), "{schema}");
}

async fn a_servers_question_while_a_prompt_is_got_or_a_resource_read_reaches_a_2025_client(app: &TestApp) {
    // Arrange
    let mut upstream = asking_server(app).await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    introduce_is_listed(&client).await;
    client.answer_forms([accept("Ada"), accept("Lin"), ElicitResult::new(ElicitationAction::Decline)]);

    // Act
    let introduced = client.peer().get_prompt(prompt_params(None, None)).await.unwrap();
    let read = client.peer().read_resource(read_params(None, None)).await.unwrap();

    // Assert: each question was asked on its own request's stream, naming the server, and the
    // server got each answer within the request that asked.
    for _ in 0..2 {
        let (message, schema) = client.next_form_elicitation().await;
        assert!(message.starts_with("The server crm (behind this broker) asks:"), "{message}");
        assert_eq!(schema["required"], json!(["name"]), "{schema}");
    }
    assert_eq!(prompt_text(&introduced), "Introduce Ada on behalf of nobody.");
    assert_eq!(read_text(&read), "Hello, Lin.");
    upstream.printed("elicitation answered: accept").await;

    // A decline goes back as the client gave it.
    let declined = client.peer().read_resource(read_params(None, None)).await.unwrap();
    assert_eq!(read_text(&declined), "Hello, (decline).");
    upstream.printed("elicitation answered: decline").await;

    // Audited as any prompt or read, without the answers.
    app.state.core.store.audit_queue().flush().await;
    let entries = app.state.core.store.audit().entries(Some(&app.user_id(ALICE).await), 100).await.unwrap();
    let details: Vec<String> = entries.iter().filter_map(|e| e.detail.clone()).collect();
    assert!(details.iter().any(|d| d.contains("server=crm prompt=introduce outcome=ok")), "{details:?}");
    assert!(details.iter().all(|d| !d.contains("Ada") && !d.contains("Lin")), "{details:?}");
    client.close().await;
    upstream.stop().await;
}
on_both_backends!(asked_within_2025, a_servers_question_while_a_prompt_is_got_or_a_resource_read_reaches_a_2025_client);

async fn a_2026_client_answers_a_servers_question_while_a_prompt_is_got_by_retrying_the_same_request(app: &TestApp) {
    // Arrange
    let mut upstream = asking_server(app).await;
    let client = app.mcp_client_2026(ALICE, ClientKind::Url).await;
    introduce_is_listed(&client).await;

    // Act: the prompt, one round at a time.
    let first = client.peer().get_prompt_once(prompt_params(None, None)).await.unwrap();

    // Assert: the broker's round with the server's form, worded as the server's; the request
    // waits on the broker.
    let GetPromptResponse::InputRequired(round) = first else { panic!("expected a round: {first:?}") };
    let (key, asked) = only_request(&round);
    assert_the_servers_form(&asked);
    let state = round.request_state.clone().expect("the broker's state");
    assert!(state.starts_with("ob1."), "{state:.20}");
    assert_eq!(app.gateway.flights.len(), 1, "the request waits on the broker");

    // Act + Assert: the state is bound to this prompt: a read cannot carry it, and the flight
    // is still there for the prompt's own retry.
    let answer = json!({ key.clone(): {"action": "accept", "content": {"name": "Ada"}} });
    let elsewhere = client.peer().read_resource_once(read_params(Some(&state), Some(answer.clone()))).await;
    assert!(matches!(&elsewhere, Err(rmcp::ServiceError::McpError(e)) if e.code.0 == -32602), "{elsewhere:?}");
    assert_eq!(app.gateway.flights.len(), 1);

    // Act: the retry answers.
    let retry = client.peer().get_prompt_once(prompt_params(Some(&state), Some(answer.clone()))).await.unwrap();

    // Assert: the same request finished with the answer; nothing waits any more.
    let GetPromptResponse::Complete(introduced) = retry else { panic!("expected the prompt: {retry:?}") };
    assert_eq!(prompt_text(&introduced), "Introduce Ada on behalf of nobody.");
    upstream.printed("elicitation answered: accept").await;
    assert!(app.gateway.flights.is_empty());

    // Assert: the same state again is a replay.
    let replay = client.peer().get_prompt_once(prompt_params(Some(&state), Some(answer))).await;
    assert!(matches!(&replay, Err(rmcp::ServiceError::McpError(e)) if e.code.0 == -32602), "{replay:?}");
    client.close().await;
    upstream.stop().await;
}
on_both_backends!(
    asked_within_prompt_2026,
    a_2026_client_answers_a_servers_question_while_a_prompt_is_got_by_retrying_the_same_request
);

async fn a_2026_client_answers_a_servers_question_while_a_resource_is_read(app: &TestApp) {
    // Arrange
    let mut upstream = asking_server(app).await;
    let client = app.mcp_client_2026(ALICE, ClientKind::Url).await;

    // Act: one round by hand, declined.
    let first = client.peer().read_resource_once(read_params(None, None)).await.unwrap();
    let ReadResourceResponse::InputRequired(round) = first else { panic!("expected a round: {first:?}") };
    let (key, asked) = only_request(&round);
    assert_the_servers_form(&asked);
    let state = round.request_state.clone().expect("the broker's state");
    let decline = json!({ key: {"action": "decline"} });
    let retry = client.peer().read_resource_once(read_params(Some(&state), Some(decline))).await.unwrap();

    // Assert: the decline reached the server within the read that asked.
    let ReadResourceResponse::Complete(declined) = retry else { panic!("expected the contents: {retry:?}") };
    assert_eq!(read_text(&declined), "Hello, (decline).");
    upstream.printed("elicitation answered: decline").await;

    // Act: a client that drives the rounds itself.
    client.answer_forms([accept("Lin")]);
    let read = client.service.read_resource(read_params(None, None)).await.unwrap();

    // Assert
    assert_eq!(read_text(&read), "Hello, Lin.");
    assert!(app.gateway.flights.is_empty());
    client.close().await;
    upstream.stop().await;
}
on_both_backends!(asked_within_read_2026, a_2026_client_answers_a_servers_question_while_a_resource_is_read);
