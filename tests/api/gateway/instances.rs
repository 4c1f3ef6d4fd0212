//! Gateway mode on several instances (issue 26, item 6): a 2025-11-25 server behind the broker
//! asks a question mid-call of a 2026-07-28 client, so the call waits on the instance that asked
//! (a flight); the client's retry, which a load balancer may send to any instance, reaches that
//! call. Instance A runs in the test process, instance B is the real binary in its own process,
//! both on one PostgreSQL database.

use std::time::Duration;

use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, InputRequest, InputRequiredResult, InputResponses,
};
use rmcp::service::ClientLifecycleMode;
use serde_json::{Value, json};

use crate::helpers::cluster::OtherInstance;
use crate::helpers::gateway::{asking_server, server_saw};
use crate::helpers::round_trips::answer_in;
use crate::helpers::*;

fn params(state: Option<&str>, responses: Option<Value>) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new("crm_ask_name");
    params.arguments = Some(serde_json::Map::new());
    params.request_state = state.map(str::to_owned);
    params.input_responses = responses.map(|r| serde_json::from_value::<InputResponses>(r).expect("input responses"));
    params
}

/// A 2026-07-28 client of the instance at `mcp_url`.
async fn client_at(app: &TestApp, mcp_url: &str) -> McpClient {
    let lifecycle =
        ClientLifecycleMode::Discover { preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28] };
    mcp_client_with_lifecycle(mcp_url, &app.token_for(ALICE).await, ClientKind::Url, lifecycle).await.unwrap()
}

/// The broker's round asking the server's question: its state and the key to answer under.
async fn asked(client: &McpClient) -> (String, String) {
    let answer = client.peer().call_tool_once(params(None, None)).await.unwrap();
    let CallToolResponse::InputRequired(InputRequiredResult { input_requests, request_state, .. }) = answer else {
        panic!("expected an InputRequiredResult: {answer:?}")
    };
    let (key, request) = input_requests.expect("a request").into_iter().next().unwrap();
    assert!(matches!(request, InputRequest::Elicitation(_)), "{request:?}");
    (request_state.expect("the broker's state"), key)
}

fn accept(key: &str, name: &str) -> Value {
    json!({ key: {"action": "accept", "content": {"name": name}} })
}

async fn answered(client: &McpClient, state: &str, responses: Value) -> CallToolResult {
    match client.peer().call_tool_once(params(Some(state), Some(responses))).await.unwrap() {
        CallToolResponse::Complete(result) => result,
        other => panic!("expected the call's result: {other:?}"),
    }
}

/// This process's count of retries passed on to another instance with `outcome`.
fn passed_on(outcome: &str) -> f64 {
    let metrics = oauth_broker::telemetry::render().expect("the metrics recorder is installed");
    let name = format!("oauth_broker_gateway_retries_passed_on_total{{outcome=\"{outcome}\"}} ");
    metrics.lines().find_map(|line| line.strip_prefix(&name)).map_or(0.0, |n| n.trim().parse().unwrap())
}

fn expired(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
        && result.structured_content == Some(json!({"error": "question_expired", "server": "crm"}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_that_reaches_the_other_instance_finishes_the_call_waiting_on_the_first() {
    // Arrange: crm behind the broker, Alice's client allowed; B started after (it reads the
    // registered servers as it starts).
    let Some(a) = spawn_app(Backend::Postgres).await else { return };
    let mut upstream = asking_server(&a).await;
    let b = OtherInstance::start(&a, "").await;
    let (on_a, on_b) = (client_at(&a, &a.mcp_url()).await, client_at(&a, &b.mcp_url()).await);

    // Act: the question is asked through A, the answer goes to B.
    let (state, key) = asked(&on_a).await;
    assert_eq!(a.gateway.flights.len(), 1, "the call waits on A");
    assert!(!state.contains("127.0.0.1"), "the state does not show where it waits");
    let result = answered(&on_b, &state, accept(&key, "Alice")).await;

    // Assert: the server got the answer on the call it asked in, and the result came back
    // through B; nothing waits any more.
    let seen = server_saw(&result);
    assert_eq!((seen["action"].as_str(), &seen["content"]), (Some("accept"), &json!({"name": "Alice"})), "{seen}");
    upstream.printed("elicitation answered: accept").await;
    assert!(a.gateway.flights.is_empty());

    // Act: the same answer again, through B.
    let replay = on_b.peer().call_tool_once(params(Some(&state), Some(accept(&key, "Mallory")))).await;

    // Assert: refused as any replay is (the state is spent, whichever instance used it).
    match replay {
        Err(ServiceError::McpError(error)) => assert_eq!(error.code.0, -32602, "{error:?}"),
        other => panic!("a replay must be refused: {other:?}"),
    }

    // Act: the other way round — asked through B, answered through A.
    let answered_before = passed_on("answered");
    let (state, key) = asked(&on_b).await;
    assert!(a.gateway.flights.is_empty(), "this one waits on B");
    let result = answered(&on_a, &state, accept(&key, "Alice B")).await;

    // Assert: and A counted what it passed on (each instance counts its own).
    assert_eq!(server_saw(&result)["content"], json!({"name": "Alice B"}));
    assert!(passed_on("answered") > answered_before, "A counted what it passed on (each instance counts its own)");
    on_a.close().await;
    on_b.close().await;
    drop(b);
    upstream.stop().await;
    a.stop().await;
}

/// A raw 2026-07-28 retry of `crm_ask_name` at `mcp_url`, optionally marked as passed on by an
/// instance already: the JSON-RPC answer.
async fn raw_retry(mcp_url: &str, token: &str, state: &str, responses: Value, marked: bool) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "crm_ask_name",
        "arguments": {},
        "requestState": state,
        "inputResponses": responses,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "instances-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}, "form": {}}},
        },
    }});
    let mut request = reqwest::Client::new()
        .post(mcp_url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "crm_ask_name")
        .json(&body);
    if marked {
        request = request.header("oauth-broker-forwarded", "1");
    }
    let response = request.send().await.unwrap();
    answer_in(&response.text().await.unwrap()).expect("a JSON-RPC answer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_altered_home_or_a_forged_mark_keeps_the_retry_where_it_landed_and_the_call_still_waits() {
    // Arrange: a question waiting on A.
    let Some(a) = spawn_app(Backend::Postgres).await else { return };
    let upstream = asking_server(&a).await;
    let b = OtherInstance::start(&a, "").await;
    let on_a = client_at(&a, &a.mcp_url()).await;
    let (state, key) = asked(&on_a).await;
    let token = a.token_for(ALICE).await;
    let (sealed, home) = state.rsplit_once('.').expect("the state names its home");
    let mut altered_home = home.as_bytes().to_vec();
    let middle = altered_home.len() / 2;
    altered_home[middle] = if altered_home[middle] == b'A' { b'B' } else { b'A' };
    let altered = format!("{sealed}.{}", String::from_utf8(altered_home).unwrap());

    // Act: B gets the retry with its home altered; then, for a second question, a retry
    // marked as passed on already.
    let with_altered_home = raw_retry(&b.mcp_url(), &token, &altered, accept(&key, "Eve"), false).await;
    let (second, second_key) = asked(&on_a).await;
    let marked = raw_retry(&b.mcp_url(), &token, &second, accept(&second_key, "Eve"), true).await;

    // Assert: neither left B — B holds no such call, so for each the question expired (and,
    // as for any retry that used its state, the state is spent) — and neither call on A was
    // reached: both still wait.
    for answer in [&with_altered_home, &marked] {
        let result: CallToolResult = serde_json::from_value(answer["result"].clone()).expect("a tool result");
        assert!(expired(&result), "{answer}");
    }
    assert_eq!(a.gateway.flights.len(), 2, "the calls on A were not touched");
    on_a.close().await;
    drop(b);
    upstream.stop().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_whose_instance_is_gone_is_told_at_once_to_call_again_and_the_call_again_works() {
    // Arrange: a question waiting on B; then B dies.
    let Some(a) = spawn_app(Backend::Postgres).await else { return };
    let mut upstream = asking_server(&a).await;
    let mut b = OtherInstance::start(&a, "").await;
    let on_b = client_at(&a, &b.mcp_url()).await;
    let (state, key) = asked(&on_b).await;
    b.kill();

    // Act: the retry reaches A.
    let unreachable_before = passed_on("home_unreachable");
    let on_a = client_at(&a, &a.mcp_url()).await;
    let result = tokio::time::timeout(Duration::from_secs(30), answered(&on_a, &state, accept(&key, "Alice")))
        .await
        .expect("answered without waiting for the dead instance");

    // Assert: told to call again (B refuses connections at once; at worst A waits the connect
    // wait, far below the call's timeout) …
    assert!(expired(&result), "{result:?}");
    assert!(passed_on("home_unreachable") > unreachable_before);
    // … and calling again asks again, on A, and finishes there.
    let (state, key) = asked(&on_a).await;
    let result = answered(&on_a, &state, accept(&key, "Alice")).await;
    assert_eq!(server_saw(&result)["content"], json!({"name": "Alice"}));
    upstream.printed("elicitation answered: accept").await;
    on_a.close().await;
    on_b.close().await;
    upstream.stop().await;
    a.stop().await;
}
