//! Gateway mode (issue 26, item 3) with a server that speaks the stateless 2026-07-28 revision:
//! `tests/python/echo_server.py` (the official MCP Python SDK, its own process). The broker
//! finds the revision by `server/discover`, calls it stateless with each user's own token, and
//! relays the server's `InputRequiredResult` in the client's era: to a 2026-07-28 client as a
//! round trip of the broker's (the server's state sealed inside the broker's), to a 2025-11-25
//! session as nested elicitations followed by the retry upstream — on tool calls, `prompts/get`
//! and `resources/read` alike.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequestParams, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, InputRequest, InputResponses, ReadResourceRequestParams, ReadResourceResult, ResourceContents,
};
use serde_json::{Value, json};

use crate::helpers::gateway::{Upstream, account_of, add_provider_server, connected_2025, connected_2026};
use crate::helpers::python::python_server;
use crate::helpers::*;
use crate::on_both_backends;

fn structured(result: &rmcp::model::CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    result.structured_content.clone().unwrap_or_default()
}

fn params(name: &str, state: Option<&str>, responses: Option<Value>) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = Some(Default::default());
    params.request_state = state.map(str::to_owned);
    params.input_responses = responses.map(|r| serde_json::from_value::<InputResponses>(r).expect("input responses"));
    params
}

async fn a_2026_07_28_server_is_called_stateless_with_each_users_own_token(app: &TestApp) {
    // Arrange: the Python server behind the broker; alice on a 2025-11-25 session, bob on
    // stateless 2026-07-28.
    let Some(upstream) = python_server(app).await else { return };
    add_provider_server(app, "pyecho", &upstream).await;
    let alice = connected_2025(app, "pyecho", ALICE, "alice-demo").await;
    let bob = connected_2026(app, "pyecho_whoami", BOB, "bob-demo").await;

    // Act
    let alices = alice.call("pyecho_whoami", json!({})).await.unwrap();
    let bobs = bob.call("pyecho_whoami", json!({})).await.unwrap();

    // Assert: whatever the client's era, the server was spoken to in its own revision, with no
    // session, and each call carried its user's own token.
    for (result, account) in [(&alices, "alice-demo"), (&bobs, "bob-demo")] {
        assert_eq!(account_of(result), account);
        let seen = structured(result);
        assert_eq!(seen["protocol"], "2026-07-28", "{seen}");
        assert_eq!(seen["session"], Value::Null, "no Mcp-Session-Id: {seen}");
    }
    assert_ne!(structured(&alices)["credential_sha256"], structured(&bobs)["credential_sha256"]);
    alice.close().await;
    upstream.stop().await;
}
on_both_backends!(stateless_server_per_user, a_2026_07_28_server_is_called_stateless_with_each_users_own_token);

async fn a_2026_servers_question_reaches_a_2026_client_with_the_servers_state_sealed_in_the_brokers(app: &TestApp) {
    // Arrange
    let Some(upstream) = python_server(app).await else { return };
    add_provider_server(app, "pyecho", &upstream).await;
    let bob = connected_2026(app, "pyecho_connect", BOB, "bob-demo").await;

    // Act: one round only — the result as the broker sends it.
    let first = bob.peer().call_tool_once(params("pyecho_ask_name", None, None)).await.unwrap();

    // Assert: the server's question, naming the server, under the server's key; the state is
    // the broker's, and the server's own is not readable in it.
    let CallToolResponse::InputRequired(asked) = first else { panic!("expected an InputRequiredResult: {first:?}") };
    let requests = asked.input_requests.clone().expect("input requests");
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["name"]);
    let Some(InputRequest::Elicitation(question)) = requests.get("name") else { panic!("{requests:?}") };
    let ElicitRequestParams::FormElicitationParams { message, .. } = &question.params else { panic!("{question:?}") };
    assert_eq!(message, "The server pyecho (behind this broker) asks: What is your name?");
    let state = asked.request_state.clone().expect("a requestState");
    assert!(state.starts_with("ob1."), "the broker's own state: {state:.20}");
    assert!(!state[4..].contains('.'), "the server's own (dotted) state is not in the clear");

    // Act + Assert: an altered state is refused, and the server is not called with it.
    let mut altered = state.clone().into_bytes();
    let last = altered.len() - 5;
    altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    let answer = json!({"name": {"action": "accept", "content": {"name": "Ada"}}});
    let refused = bob.peer().call_tool_once(params("pyecho_ask_name", Some(&altered), Some(answer.clone()))).await;
    assert!(matches!(&refused, Err(rmcp::ServiceError::McpError(e)) if e.code.0 == -32602), "{refused:?}");

    // Act: the retry with the state as given and the answer (plus a key the server did not ask).
    let mut with_extra = answer.clone();
    with_extra["authorize"] = json!({"action": "accept"});
    let retry = bob.peer().call_tool_once(params("pyecho_ask_name", Some(&state), Some(with_extra))).await.unwrap();

    // Assert: the server got its own state back with the answer, and answered.
    let CallToolResponse::Complete(done) = retry else { panic!("expected the server's result: {retry:?}") };
    let seen = structured(&done);
    assert_eq!((seen["action"].as_str(), seen["name"].as_str()), (Some("accept"), Some("Ada")), "{seen}");
    assert_eq!(seen["state"], "python-state-1", "the server's own state, unchanged: {seen}");

    // Assert: the same state again is a replay.
    let replay = bob.peer().call_tool_once(params("pyecho_ask_name", Some(&state), Some(answer))).await;
    assert!(matches!(&replay, Err(rmcp::ServiceError::McpError(e)) if e.code.0 == -32602), "{replay:?}");

    // Assert: a client that drives the rounds itself gets there too, and a URL is relayed as
    // the server's page, not the broker's.
    bob.answer_forms([
        rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept).with_content(json!({"name": "Grace"}))
    ]);
    let driven = bob.call("pyecho_ask_name", json!({})).await.unwrap();
    assert_eq!(structured(&driven)["name"], "Grace");
    let page = bob.call("pyecho_open_page", json!({})).await.unwrap();
    assert_eq!(structured(&page)["action"], "accept");
    assert_eq!(structured(&page)["state"], "python-state-page");
    let shown = bob.drain_elicitations().await;
    let link = shown.iter().find_map(|e| match e {
        ElicitRequestParams::UrlElicitationParams { url, message, .. } => Some((url.clone(), message.clone())),
        _ => None,
    });
    let (url, message) = link.expect("the server's page was shown");
    assert_eq!(url, "https://vendor.example/login");
    assert!(message.contains("pyecho") && message.contains("not the broker's"), "{message}");
    upstream.stop().await;
}
on_both_backends!(
    stateless_server_round_2026,
    a_2026_servers_question_reaches_a_2026_client_with_the_servers_state_sealed_in_the_brokers
);

async fn a_2026_servers_question_reaches_a_2025_session_as_a_nested_elicitation_then_the_retry(app: &TestApp) {
    // Arrange
    let Some(upstream) = python_server(app).await else { return };
    add_provider_server(app, "pyecho", &upstream).await;
    let alice = connected_2025(app, "pyecho", ALICE, "alice-demo").await;
    alice.answer_forms([
        rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept).with_content(json!({"name": "Ada"}))
    ]);

    // Act
    let greeted = alice.call("pyecho_ask_name", json!({})).await.unwrap();
    let page = alice.call("pyecho_open_page", json!({})).await.unwrap();

    // Assert: the form was asked on the call's stream, naming the server; the server got the
    // answer with its own state on the retry.
    let (message, schema) = alice.next_form_elicitation().await;
    assert_eq!(message, "The server pyecho (behind this broker) asks: What is your name?");
    assert_eq!(schema["required"], json!(["name"]));
    let seen = structured(&greeted);
    assert_eq!((seen["name"].as_str(), seen["state"].as_str()), (Some("Ada"), Some("python-state-1")), "{seen}");
    // The link went out as the server's page, under an id of the broker's.
    match alice.next_elicitation().await {
        ElicitRequestParams::UrlElicitationParams { url, message, elicitation_id, .. } => {
            assert_eq!(url, "https://vendor.example/login");
            assert!(message.contains("pyecho") && message.contains("not the broker's"), "{message}");
            assert_ne!(elicitation_id, "vendor-1");
        }
        other => panic!("expected a URL elicitation: {other:?}"),
    }
    assert_eq!(structured(&page)["action"], "accept");
    alice.close().await;
    upstream.stop().await;
}
on_both_backends!(
    stateless_server_round_2025,
    a_2026_servers_question_reaches_a_2025_session_as_a_nested_elicitation_then_the_retry
);

fn ask_greeting(state: Option<&str>, responses: Option<Value>) -> GetPromptRequestParams {
    let mut params = GetPromptRequestParams::new("pyecho_ask_greeting");
    params.request_state = state.map(str::to_owned);
    params.input_responses = responses.map(|r| serde_json::from_value::<InputResponses>(r).expect("input responses"));
    params
}

fn prompt_text(result: &GetPromptResult) -> String {
    serde_json::to_value(&result.messages).unwrap()[0]["content"]["text"].as_str().unwrap().to_owned()
}

fn read_text(result: &ReadResourceResult) -> String {
    match &result.contents[..] {
        [ResourceContents::TextResourceContents { text, .. }] => text.clone(),
        other => panic!("one text content expected: {other:?}"),
    }
}

/// The server's template that asks who reads it first.
const ASKING_NOTE: &str = "gateway://pyecho/pynote://ask/desk";

async fn a_2026_servers_question_on_a_prompt_or_a_read_reaches_a_2026_client_as_the_brokers_round(app: &TestApp) {
    // Arrange
    let Some(upstream) = python_server(app).await else { return };
    add_provider_server(app, "pyecho", &upstream).await;
    let bob = connected_2026(app, "pyecho_connect", BOB, "bob-demo").await;

    // Act: one round of the prompt — the result as the broker sends it.
    let first = bob.peer().get_prompt_once(ask_greeting(None, None)).await.unwrap();

    // Assert: the server's question under its key, naming the server; the state is the broker's.
    let GetPromptResponse::InputRequired(asked) = first else { panic!("expected an InputRequiredResult: {first:?}") };
    let requests = asked.input_requests.clone().expect("input requests");
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["name"]);
    let Some(InputRequest::Elicitation(question)) = requests.get("name") else { panic!("{requests:?}") };
    let ElicitRequestParams::FormElicitationParams { message, .. } = &question.params else { panic!("{question:?}") };
    assert_eq!(message, "The server pyecho (behind this broker) asks: Who is reading?");
    let state = asked.request_state.clone().expect("a requestState");
    assert!(state.starts_with("ob1."), "the broker's own state: {state:.20}");
    assert!(!state.contains("python-state"), "the server's own state is not in the clear");

    // Act + Assert: the state is bound to this prompt: a read cannot carry it.
    let answer = json!({"name": {"action": "accept", "content": {"name": "Ada"}}});
    let mut elsewhere = ReadResourceRequestParams::new(ASKING_NOTE);
    elsewhere.request_state = Some(state.clone());
    let refused = bob.peer().read_resource_once(elsewhere).await;
    assert!(matches!(&refused, Err(rmcp::ServiceError::McpError(e)) if e.code.0 == -32602), "{refused:?}");

    // Act: the retry with the state as given and the answer (plus a key the server did not ask).
    let mut with_extra = answer.clone();
    with_extra["authorize"] = json!({"action": "accept"});
    let retry = bob.peer().get_prompt_once(ask_greeting(Some(&state), Some(with_extra))).await.unwrap();

    // Assert: the server got its own state back with the answer, and answered.
    let GetPromptResponse::Complete(done) = retry else { panic!("expected the server's prompt: {retry:?}") };
    assert_eq!(prompt_text(&done), "Hello Ada (python-state-prompt).");
    let replay = bob.peer().get_prompt_once(ask_greeting(Some(&state), Some(answer))).await;
    assert!(matches!(&replay, Err(rmcp::ServiceError::McpError(e)) if e.code.0 == -32602), "{replay:?}");

    // Act + Assert: a read's round, driven by the client itself, reaches the server the same way.
    bob.answer_forms([
        rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept).with_content(json!({"name": "Grace"}))
    ]);
    let read = bob.service.read_resource(ReadResourceRequestParams::new(ASKING_NOTE)).await.unwrap();
    assert_eq!(read_text(&read), "desk: Grace (python-state-read)");
    upstream.stop().await;
}
on_both_backends!(
    stateless_server_content_round_2026,
    a_2026_servers_question_on_a_prompt_or_a_read_reaches_a_2026_client_as_the_brokers_round
);

async fn a_2026_servers_question_on_a_prompt_or_a_read_reaches_a_2025_session_as_a_nested_elicitation(app: &TestApp) {
    // Arrange
    let Some(upstream) = python_server(app).await else { return };
    add_provider_server(app, "pyecho", &upstream).await;
    let alice = connected_2025(app, "pyecho", ALICE, "alice-demo").await;
    let accept = |name: &str| {
        rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept).with_content(json!({"name": name}))
    };
    alice.answer_forms([accept("Ada"), accept("Lin")]);

    // Act
    let greeted = alice.peer().get_prompt(ask_greeting(None, None)).await.unwrap();
    let read = alice.peer().read_resource(ReadResourceRequestParams::new(ASKING_NOTE)).await.unwrap();

    // Assert: each question was asked on its request's stream, naming the server; the server
    // got each answer with its own state on the retry.
    for _ in 0..2 {
        let (message, schema) = alice.next_form_elicitation().await;
        assert_eq!(message, "The server pyecho (behind this broker) asks: Who is reading?");
        assert_eq!(schema["required"], json!(["name"]));
    }
    assert_eq!(prompt_text(&greeted), "Hello Ada (python-state-prompt).");
    assert_eq!(read_text(&read), "desk: Lin (python-state-read)");

    // Audited as any prompt or read, without the answers.
    app.state.core.store.audit_queue().flush().await;
    let entries = app.state.core.store.audit().entries(Some(&app.user_id(ALICE).await), 100).await.unwrap();
    let details: Vec<String> = entries.iter().filter_map(|e| e.detail.clone()).collect();
    assert!(details.iter().any(|d| d.contains("server=pyecho prompt=ask_greeting outcome=ok")), "{details:?}");
    assert!(details.iter().all(|d| !d.contains("Ada") && !d.contains("Lin")), "{details:?}");
    alice.close().await;
    upstream.stop().await;
}
on_both_backends!(
    stateless_server_content_round_2025,
    a_2026_servers_question_on_a_prompt_or_a_read_reaches_a_2025_session_as_a_nested_elicitation
);

async fn the_example_server_of_2025_11_25_is_still_spoken_to_in_a_session(app: &TestApp) {
    // Arrange: the rmcp example server, which answers `server/discover` "unsupported version".
    let upstream = Upstream::bearer(app).await;
    add_provider_server(app, "notes", &upstream).await;
    let alice = connected_2025(app, "notes", ALICE, "alice-demo").await;

    // Act: a question mid-call, which only a session can carry.
    alice.answer_forms([
        rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept).with_content(json!({"name": "Ada"}))
    ]);
    let asked = alice.call("notes_ask_name", json!({})).await.unwrap();

    // Assert
    assert_ne!(asked.is_error, Some(true), "{asked:?}");
    let (message, _) = alice.next_form_elicitation().await;
    assert!(message.starts_with("The server notes (behind this broker) asks:"), "{message}");
    alice.close().await;
    upstream.stop().await;
}
on_both_backends!(session_server_fallback, the_example_server_of_2025_11_25_is_still_spoken_to_in_a_session);

/// `[gateway] list_refresh` at its least: a stateless server cannot say its list changed, so
/// the broker reads it again over a user's open connection and tells its listening clients.
/// One backend: nothing of this is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_servers_changed_tool_list_is_read_again_and_announced() {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use std::sync::atomic::Ordering;

    // Arrange: the Python server behind the broker, alice connected to it; another client of
    // hers listening for list changes.
    let options = SpawnOptions { toml: "[gateway]\nlist_refresh = \"1s\"\n".into(), ..Default::default() };
    let app = spawn_app_opts(Backend::Sqlite, options, |builder| builder).await.unwrap();
    let Some(upstream) = python_server(&app).await else { return app.stop().await };
    add_provider_server(&app, "pyecho", &upstream).await;
    let alice = connected_2025(&app, "pyecho", ALICE, "alice-demo").await;
    let counting = crate::helpers::gateway::ToolListChangeCounter::default();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(app.mcp_url()).auth_header(app.token_for(ALICE).await),
    );
    let listening = counting.clone().serve_with_lifecycle(transport, ClientLifecycleMode::Initialize).await.unwrap();
    let listed = |names: Vec<rmcp::model::Tool>| names.iter().any(|t| t.name == "pyecho_late_echo");
    assert!(!listed(listening.peer().list_all_tools().await.unwrap()), "not there yet");
    let heard = counting.0.load(Ordering::SeqCst);

    // Act: the server's list grows; it says nothing (it cannot).
    let added = alice.call("pyecho_add_late_tool", json!({})).await.unwrap();
    assert_eq!(structured(&added)["added"], true);

    // Assert: within the refresh, the listening client is told and the new tool is listed and
    // called through the broker.
    eventually("the listening client is told and the new tool listed", std::time::Duration::from_secs(15), || async {
        counting.0.load(Ordering::SeqCst) > heard && listed(listening.peer().list_all_tools().await.unwrap())
    })
    .await;
    let echoed = alice.call("pyecho_late_echo", json!({"text": "late"})).await.unwrap();
    assert_eq!(structured(&echoed)["text"], "late");
    let _ = listening.cancel().await;
    alice.close().await;
    upstream.stop().await;
    app.stop().await;
}
