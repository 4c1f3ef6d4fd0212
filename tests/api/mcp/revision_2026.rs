//! MCP 2026-07-28 (stateless) as the broker speaks it, sent as raw HTTP the way a stateless
//! client sends it: `resultType` on finished results, multi round-trip requests
//! (`InputRequiredResult`) through the extension API, `subscriptions/listen`, `-32021` for an
//! undeclared capability, and log messages only for a request that asked for a `logLevel`.
//! Beside each, a 2025-11-25 session shows what it gets is unchanged.

use std::sync::atomic::{AtomicBool, Ordering};

use oauth_broker::mcp::extension::{Extension, ExtensionContext, ExtensionFuture};
use oauth_broker::mcp::logging::LogLevel;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock, ErrorData, GetPromptResponse, GetPromptResult,
    InputRequiredResult, JsonObject, Prompt, ReadResourceResponse, RequestStateCodec, Resource, SealOptions, Tool,
};
use serde_json::{Value, json};

use crate::helpers::streams::{Events, RawSession};
use crate::helpers::{ALICE, BOB, Backend, TestApp, spawn_app_with};

const REVISION: &str = "2026-07-28";
const ASKED: &str = "test://asked";

// ---- the extension under test ----

/// Asks its questions the 2026-07-28 way: a tool, a prompt and a resource that answer with an
/// `InputRequiredResult`, the tool keeping a sealed `requestState`; plus a tool that needs
/// sampling, one that logs, and one that changes the prompt list.
struct Asker {
    codec: RequestStateCodec,
    extra_prompt: AtomicBool,
}

impl Asker {
    fn new() -> Self {
        Self { codec: RequestStateCodec::try_new(vec![7u8; 32]).unwrap(), extra_prompt: AtomicBool::new(false) }
    }

    fn binding(ctx: &ExtensionContext) -> String {
        format!("{}\nask_name", ctx.user.user_id)
    }

    fn ask_name(&self, ctx: &ExtensionContext) -> Result<CallToolResponse, ErrorData> {
        if !ctx.input_required_supported() {
            return Ok(CallToolResult::error(vec![ContentBlock::text("asks only in 2026-07-28")]).into());
        }
        let bound = Self::binding(ctx);
        if let Some(state) = ctx.request_state() {
            let round: u32 = self
                .codec
                .open_json_with(state, bound.as_bytes())
                .map_err(|_| ErrorData::invalid_params("requestState failed verification", None))?;
            let name =
                ctx.input_responses().and_then(|answers| answers.get("name")).and_then(|a| a.pointer("/content/name"));
            if let Some(name) = name.and_then(Value::as_str) {
                return Ok(
                    CallToolResult::success(vec![ContentBlock::text(format!("Hello, {name} (round {round})"))]).into()
                );
            }
        }
        let form = json!({"method": "elicitation/create", "params": {"mode": "form", "message": "Your name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}});
        let state = self.codec.seal_json_with(&1u32, &SealOptions::new().associated_data(bound.as_bytes())).unwrap();
        let requests = [("name".to_owned(), serde_json::from_value(form).unwrap())].into_iter().collect();
        Ok(InputRequiredResult::new(Some(requests), Some(state)).into())
    }
}

fn topic_form() -> InputRequiredResult {
    let form = json!({"method": "elicitation/create", "params": {"mode": "form", "message": "Which topic?",
        "requestedSchema": {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}}});
    InputRequiredResult::from_input_requests(
        [("topic".to_owned(), serde_json::from_value(form).unwrap())].into_iter().collect(),
    )
}

fn topic(ctx: &ExtensionContext) -> Option<String> {
    let answer = ctx.input_responses()?.get("topic")?;
    answer.pointer("/content/topic").and_then(Value::as_str).map(str::to_owned)
}

impl Extension for Asker {
    fn tools(&self) -> Vec<Tool> {
        let schema = std::sync::Arc::new(json!({"type": "object"}).as_object().cloned().unwrap());
        let mut tools: Vec<Tool> = ["ask_name", "needs_sampling", "chatty", "change_prompts"]
            .into_iter()
            .map(|name| Tool::new(name, "for the 2026-07-28 tests", schema.clone()))
            .collect();
        let regional = json!({"type": "object", "required": ["region"],
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}});
        tools.push(Tool::new(
            "regional",
            "its region travels as a header too",
            std::sync::Arc::new(regional.as_object().cloned().unwrap()),
        ));
        tools
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        _arguments: Option<JsonObject>,
        ctx: ExtensionContext,
    ) -> ExtensionFuture<'a, CallToolResponse> {
        Box::pin(async move {
            let done = |text: &str| Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into());
            Some(match name {
                "ask_name" => self.ask_name(&ctx),
                "needs_sampling" => {
                    let sampling: ClientCapabilities = serde_json::from_value(json!({"sampling": {}})).unwrap();
                    ctx.require_client_capabilities(sampling).and_then(|()| done("sampling was declared"))
                }
                "chatty" => {
                    ctx.log(LogLevel::Info, json!("an info message")).await;
                    #[allow(deprecated)]
                    let warning = rmcp::model::LoggingMessageNotificationParam::new(
                        rmcp::model::LoggingLevel::Warning,
                        json!("a warning about this call"),
                    );
                    ctx.notify_log(warning).await.unwrap();
                    done("chatted")
                }
                "regional" => done("served"),
                "change_prompts" => {
                    self.extra_prompt.fetch_xor(true, Ordering::SeqCst);
                    ctx.prompts_changed();
                    done("changed")
                }
                _ => return None,
            })
        })
    }

    fn prompts(&self) -> Vec<Prompt> {
        let mut prompts = vec![Prompt::new("ask_topic", Some("asks for a topic first"), None)];
        if self.extra_prompt.load(Ordering::SeqCst) {
            prompts.push(Prompt::new("extra", Some("comes and goes"), None));
        }
        prompts
    }

    fn get_prompt<'a>(
        &'a self,
        name: &'a str,
        _arguments: std::collections::BTreeMap<String, String>,
        ctx: ExtensionContext,
    ) -> ExtensionFuture<'a, GetPromptResponse> {
        Box::pin(async move {
            (name == "ask_topic").then(|| match topic(&ctx) {
                Some(topic) => {
                    let message = rmcp::model::PromptMessage::new_text(rmcp::model::Role::User, topic);
                    Ok(GetPromptResult::new(vec![message]).into())
                }
                None => Ok(topic_form().into()),
            })
        })
    }

    fn resources(&self) -> Vec<Resource> {
        vec![serde_json::from_value(json!({"uri": ASKED, "name": "asked"})).unwrap()]
    }

    fn read_resource<'a>(&'a self, uri: &'a str, ctx: ExtensionContext) -> ExtensionFuture<'a, ReadResourceResponse> {
        Box::pin(async move {
            (uri == ASKED).then(|| match topic(&ctx) {
                Some(topic) => {
                    let contents =
                        serde_json::from_value(json!({"contents": [{"uri": ASKED, "text": topic}]})).unwrap();
                    Ok(ReadResourceResponse::Complete(contents))
                }
                None => Ok(topic_form().into()),
            })
        })
    }
}

// ---- a stateless client, as raw HTTP ----

/// Every message of the answer to one stateless request, the answer last.
struct Answer {
    status: u16,
    messages: Vec<Value>,
}

impl Answer {
    fn reply(&self) -> &Value {
        self.messages
            .iter()
            .find(|m| m.get("id").is_some())
            .unwrap_or_else(|| panic!("an answer in {:?}", self.messages))
    }

    fn log_messages(&self) -> Vec<&Value> {
        self.messages.iter().filter(|m| m["method"] == "notifications/message").collect()
    }
}

fn meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": REVISION,
        "io.modelcontextprotocol/clientInfo": {"name": "stateless-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

fn everything() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {}})
}

/// Sends `method` with `params` (whose `_meta` is [`meta`] of `capabilities`, plus `extra_meta`).
fn stateless_request(
    app: &TestApp,
    token: &str,
    method: &str,
    mut params: Value,
    capabilities: Value,
    extra_meta: Value,
) -> reqwest::RequestBuilder {
    let mut meta = meta(capabilities);
    meta.as_object_mut().unwrap().extend(extra_meta.as_object().cloned().unwrap_or_default());
    params["_meta"] = meta;
    let body = json!({"jsonrpc": "2.0", "id": 41, "method": method, "params": params});
    let mut request = reqwest::Client::new()
        .post(app.mcp_url())
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", REVISION)
        .header("mcp-method", method);
    // SEP-2243: the name a request acts on travels in a header too.
    if let Some(name) = params.get("name").or(params.get("uri")).and_then(Value::as_str) {
        request = request.header("mcp-name", name);
    }
    request.json(&body)
}

async fn stateless(app: &TestApp, token: &str, method: &str, params: Value) -> Answer {
    stateless_with(app, token, method, params, everything(), json!({})).await
}

async fn stateless_with(
    app: &TestApp,
    token: &str,
    method: &str,
    params: Value,
    capabilities: Value,
    extra_meta: Value,
) -> Answer {
    let response = stateless_request(app, token, method, params, capabilities, extra_meta).send().await.unwrap();
    let status = response.status().as_u16();
    assert!(response.headers().get("mcp-session-id").is_none(), "no session is made");
    let text = response.text().await.unwrap();
    // JSON, or SSE whose data lines hold the messages.
    let messages = std::iter::once(text.as_str())
        .chain(text.lines().filter_map(|line| line.strip_prefix("data:")))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .collect();
    Answer { status, messages }
}

async fn with_asker(backend: Backend) -> Option<TestApp> {
    spawn_app_with(backend, |builder| builder.extension(Asker::new())).await
}

macro_rules! on_both_backends_with_asker {
    ($name:ident, $body:ident) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let app = with_asker(Backend::Sqlite).await.unwrap();
                $body(&app).await;
                app.stop().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(app) = with_asker(Backend::Postgres).await else { return };
                $body(&app).await;
                app.stop().await;
            }
        }
    };
}

/// The JSON-RPC answer of a 2025-11-25 session to one request.
async fn in_session(session: &RawSession, method: &str, params: Value) -> Value {
    let response = session.post(json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params})).await;
    let text = response.text().await.unwrap();
    std::iter::once(text.as_str())
        .chain(text.lines().filter_map(|line| line.strip_prefix("data:")))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message.get("id").is_some())
        .unwrap_or_else(|| panic!("an answer in {text}"))
}

// ---- resultType ----

async fn finished_results_say_complete_in_2026_and_sessions_get_them_as_before(app: &TestApp) {
    let alice = app.token_for(ALICE).await;
    let cases = [
        ("prompts/get", json!({"name": "review_connections", "arguments": {}})),
        ("resources/read", json!({"uri": "broker://providers"})),
        ("tools/call", json!({"name": "list_connections", "arguments": {}})),
        ("prompts/list", json!({})),
    ];
    let session = RawSession::open(&app.mcp_url(), &alice).await;
    for (method, params) in cases {
        let answer = stateless(app, &alice, method, params.clone()).await;
        assert_eq!(answer.reply()["result"]["resultType"], "complete", "{method}: {:?}", answer.messages);
        // MCP 2025-11-25 has no resultType: a session's results do not carry it.
        let old = in_session(&session, method, params).await;
        assert!(old["result"].is_object(), "{method}: {old}");
        assert!(old["result"].get("resultType").is_none(), "{method}: {old}");
    }
}
on_both_backends_with_asker!(result_type, finished_results_say_complete_in_2026_and_sessions_get_them_as_before);

// ---- multi round-trip requests through the extension API ----

async fn an_extension_tool_asks_with_input_required_and_finishes_when_the_retry_answers(app: &TestApp) {
    let alice = app.token_for(ALICE).await;
    let first = stateless(app, &alice, "tools/call", json!({"name": "ask_name", "arguments": {}})).await;
    let result = &first.reply()["result"];
    assert_eq!(result["resultType"], "input_required", "{result}");
    assert_eq!(result["inputRequests"]["name"]["method"], "elicitation/create", "{result}");
    let state = result["requestState"].as_str().unwrap().to_owned();

    // A retry without the answer is asked again.
    let again =
        stateless(app, &alice, "tools/call", json!({"name": "ask_name", "arguments": {}, "requestState": state})).await;
    assert_eq!(again.reply()["result"]["resultType"], "input_required", "{:?}", again.messages);

    let answered = json!({"name": "ask_name", "arguments": {}, "requestState": state,
        "inputResponses": {"name": {"action": "accept", "content": {"name": "Alice"}}, "ignored": {"x": 1}}});
    let done = stateless(app, &alice, "tools/call", answered).await;
    let result = &done.reply()["result"];
    assert_eq!(result["resultType"], "complete", "{result}");
    assert_eq!(result["content"][0]["text"], "Hello, Alice (round 1)", "{result}");
}
on_both_backends_with_asker!(
    tool_round_trip,
    an_extension_tool_asks_with_input_required_and_finishes_when_the_retry_answers
);

async fn a_tampered_or_another_users_request_state_is_refused_without_saying_whose_it_was(app: &TestApp) {
    let (alice, bob) = (app.token_for(ALICE).await, app.token_for(BOB).await);
    let first = stateless(app, &alice, "tools/call", json!({"name": "ask_name", "arguments": {}})).await;
    let state = first.reply()["result"]["requestState"].as_str().unwrap().to_owned();
    let answers = json!({"name": {"action": "accept", "content": {"name": "Mallory"}}});
    let mut tampered = state.clone();
    tampered.push('A');
    for (who, token, state) in [("tampered", &alice, tampered), ("Bob replaying Alice's", &bob, state)] {
        let params = json!({"name": "ask_name", "arguments": {}, "requestState": state, "inputResponses": answers});
        let refused = stateless(app, token, "tools/call", params).await;
        let error = &refused.reply()["error"];
        assert_eq!(error["code"], -32602, "{who}: {:?}", refused.messages);
        let said = error.to_string();
        assert!(!said.contains("alice") && !said.contains("Mallory"), "{who}: {said}");
    }
}
on_both_backends_with_asker!(
    refused_state,
    a_tampered_or_another_users_request_state_is_refused_without_saying_whose_it_was
);

async fn an_extension_prompt_and_resource_ask_with_input_required_too(app: &TestApp) {
    let alice = app.token_for(ALICE).await;
    for (method, target) in [("prompts/get", json!({"name": "ask_topic"})), ("resources/read", json!({"uri": ASKED}))] {
        let first = stateless(app, &alice, method, target.clone()).await;
        let result = &first.reply()["result"];
        assert_eq!(result["resultType"], "input_required", "{method}: {result}");
        assert_eq!(result["inputRequests"]["topic"]["params"]["message"], "Which topic?", "{method}: {result}");
        let mut retry = target;
        retry["inputResponses"] = json!({"topic": {"action": "accept", "content": {"topic": "rust"}}});
        let done = stateless(app, &alice, method, retry).await;
        let result = &done.reply()["result"];
        assert_eq!(result["resultType"], "complete", "{method}: {result}");
        assert!(result.to_string().contains("rust"), "{method}: {result}");
    }
}
on_both_backends_with_asker!(prompt_and_resource, an_extension_prompt_and_resource_ask_with_input_required_too);

async fn a_2025_session_is_never_sent_an_input_required_result(app: &TestApp) {
    let session = RawSession::open(&app.mcp_url(), &app.token_for(ALICE).await).await;
    let answer = in_session(&session, "tools/call", json!({"name": "ask_name", "arguments": {}})).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(answer["result"].get("resultType").is_none(), "{answer}");
    // subscriptions/listen is 2026-07-28 only; sessions keep resources/subscribe.
    let listen =
        in_session(&session, "subscriptions/listen", json!({"notifications": {"promptsListChanged": true}})).await;
    assert_eq!(listen["error"]["code"], -32601, "{listen}");
}
on_both_backends_with_asker!(session_unchanged, a_2025_session_is_never_sent_an_input_required_result);

// ---- -32021 ----

async fn a_request_that_needs_an_undeclared_capability_gets_32021_naming_it(app: &TestApp) {
    let alice = app.token_for(ALICE).await;
    let params = json!({"name": "needs_sampling", "arguments": {}});
    let refused =
        stateless_with(app, &alice, "tools/call", params.clone(), json!({"elicitation": {}}), json!({})).await;
    assert_eq!(refused.status, 400, "{:?}", refused.messages);
    let error = &refused.reply()["error"];
    assert_eq!(error["code"], -32021, "{error}");
    assert_eq!(error["data"]["requiredCapabilities"], json!({"sampling": {}}), "{error}");
    // Declared, the same request runs.
    let served = stateless_with(app, &alice, "tools/call", params, json!({"sampling": {}}), json!({})).await;
    assert_eq!(served.reply()["result"]["content"][0]["text"], "sampling was declared", "{:?}", served.messages);
}
on_both_backends_with_asker!(missing_capability, a_request_that_needs_an_undeclared_capability_gets_32021_naming_it);

// ---- SEP-2243 headers ----

async fn a_parameter_header_that_contradicts_the_body_is_refused(app: &TestApp) {
    let alice = app.token_for(ALICE).await;
    let params = json!({"name": "regional", "arguments": {"region": "eu"}});
    let send = |header: Option<&'static str>| {
        let mut request = stateless_request(app, &alice, "tools/call", params.clone(), everything(), json!({}));
        if let Some(value) = header {
            request = request.header("mcp-param-region", value);
        }
        request.send()
    };
    // A load balancer routes on the header: one that says otherwise than the body, or is
    // missing, must not reach the tool.
    for (header, case) in [(Some("us"), "contradicting"), (None, "missing")] {
        let refused = send(header).await.unwrap();
        assert_eq!(refused.status(), 400, "{case}");
        let body: Value = refused.json().await.unwrap();
        assert!(body.get("error").is_some(), "{case}: {body}");
    }
    let served = send(Some("eu")).await.unwrap();
    assert_eq!(served.status(), 200);
    assert!(served.text().await.unwrap().contains("served"));
}
on_both_backends_with_asker!(param_headers, a_parameter_header_that_contradicts_the_body_is_refused);

// ---- logging ----

async fn a_stateless_request_gets_log_messages_only_at_the_level_it_asked_for(app: &TestApp) {
    let alice = app.token_for(ALICE).await;
    let params = json!({"name": "chatty", "arguments": {}});
    let levels = |answer: &Answer| -> Vec<String> {
        answer.log_messages().iter().map(|m| m["params"]["level"].as_str().unwrap().to_owned()).collect()
    };
    let silent = stateless(app, &alice, "tools/call", params.clone()).await;
    assert_eq!(silent.reply()["result"]["content"][0]["text"], "chatted");
    assert!(levels(&silent).is_empty(), "no logLevel, no log message: {:?}", silent.messages);

    let level = |level: &str| json!({"io.modelcontextprotocol/logLevel": level});
    let warnings = stateless_with(app, &alice, "tools/call", params.clone(), everything(), level("warning")).await;
    assert_eq!(levels(&warnings), ["warning"], "{:?}", warnings.messages);
    let everything_said = stateless_with(app, &alice, "tools/call", params.clone(), everything(), level("info")).await;
    assert_eq!(levels(&everything_said), ["info", "warning"], "{:?}", everything_said.messages);

    // A 2025-11-25 session, as before: without logging/setLevel only the message sent whatever
    // the level arrives.
    let session = RawSession::open(&app.mcp_url(), &alice).await;
    let response = session.post(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params})).await;
    let text = response.text().await.unwrap();
    assert!(text.contains("a warning about this call") && !text.contains("an info message"), "{text}");
}
on_both_backends_with_asker!(logging, a_stateless_request_gets_log_messages_only_at_the_level_it_asked_for);

// ---- subscriptions/listen ----

/// Opens `subscriptions/listen` for `token` with `filter`; the stream of its messages.
async fn listen(app: &TestApp, token: &str, filter: Value) -> Events {
    let request = stateless_request(
        app,
        token,
        "subscriptions/listen",
        json!({"notifications": filter}),
        everything(),
        json!({}),
    );
    Events::new(request.send().await.unwrap())
}

async fn next_message(events: &mut Events) -> Value {
    serde_json::from_str(&events.next_message().await.data).unwrap()
}

fn subscription_id(message: &Value) -> &Value {
    &message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
}

async fn listen_acknowledges_first_then_relays_prompt_changes_and_this_users_resource_updates(app: &TestApp) {
    let alice = app.token_for(ALICE).await;
    let mut everything_stream = listen(
        app,
        &alice,
        json!({"promptsListChanged": true, "toolsListChanged": true,
               "resourceSubscriptions": ["broker://connections", "test://nowhere"]}),
    )
    .await;
    let mut resources_only = listen(app, &alice, json!({"resourceSubscriptions": ["broker://connections"]})).await;

    // MCP 2026-07-28 basic/subscriptions: the acknowledgement comes first and says what was
    // accepted: tool list changes (servers behind the broker change it), no unknown resource.
    let ack = next_message(&mut everything_stream).await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"promptsListChanged": true, "resourceSubscriptions": ["broker://connections"], "toolsListChanged": true}),
        "{ack}"
    );
    assert_eq!(subscription_id(&ack), 41, "{ack}");
    let ack = next_message(&mut resources_only).await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");

    // A prompt list change, made through the extension API.
    let changed = stateless(app, &alice, "tools/call", json!({"name": "change_prompts", "arguments": {}})).await;
    assert_eq!(changed.reply()["result"]["content"][0]["text"], "changed");
    let note = next_message(&mut everything_stream).await;
    assert_eq!(note["method"], "notifications/prompts/list_changed", "{note}");
    assert_eq!(subscription_id(&note), 41, "{note}");

    // Bob connects first, then Alice: Alice's streams hear of her connection only (had Bob's
    // reached them, it would have come first), and the stream that asked for no prompt
    // changes heard none.
    app.connected_client(BOB).await.close().await;
    app.connected_client(ALICE).await.close().await;
    for stream in [&mut everything_stream, &mut resources_only] {
        let update = next_message(stream).await;
        assert_eq!(update["method"], "notifications/resources/updated", "{update}");
        assert_eq!(update["params"]["uri"], "broker://connections", "{update}");
        assert_eq!(subscription_id(&update), 41, "{update}");
    }
}
on_both_backends_with_asker!(
    listen_relays,
    listen_acknowledges_first_then_relays_prompt_changes_and_this_users_resource_updates
);

async fn a_listen_stream_ends_with_its_final_result_when_the_server_stops(backend: Backend) {
    let Some(mut app) = with_asker(backend).await else { return };
    let alice = app.token_for(ALICE).await;
    let mut stream = listen(&app, &alice, json!({"promptsListChanged": true})).await;
    let ack = next_message(&mut stream).await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    // Stopping waits for every connection to close, which this stream does once answered.
    let ((), last) = tokio::join!(app.stop_serving(), next_message(&mut stream));
    assert_eq!(last["id"], 41, "the listen request is answered: {last}");
    assert!(last.get("result").is_some(), "{last}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_ends_with_its_final_result_when_the_server_stops_sqlite() {
    a_listen_stream_ends_with_its_final_result_when_the_server_stops(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_ends_with_its_final_result_when_the_server_stops_postgres() {
    a_listen_stream_ends_with_its_final_result_when_the_server_stops(Backend::Postgres).await;
}
