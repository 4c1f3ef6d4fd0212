//! Multi round-trip requests (MCP 2026-07-28 basic/utilities/mrtr, SEP-2322): tools and a
//! prompt that answer with an `InputRequiredResult` and finish when the client retries with
//! `inputResponses` (scenarios `input-required-result-*`).
//!
//! Where a tool keeps progress between rounds, it travels in `requestState`, sealed with rmcp's
//! `RequestStateCodec` under a key made at start, bound to the user and the tool, with a TTL: a
//! state that was tampered with, belongs to someone else or another tool, or has expired is
//! refused with `-32602`. A missing or malformed answer is asked for again; answers to keys the
//! tool did not ask for are ignored.

use std::collections::BTreeMap;
use std::time::Duration;

use oauth_broker::mcp::extension::ExtensionContext;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock, ErrorData, GetPromptResponse, InputRequest,
    InputRequests, InputRequiredResult, Prompt, RequestStateCodec, RequestStateError, SealOptions, Tool,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::tools::no_arguments;
use super::{wire, wire_or_skip};

/// Long enough for a person to answer a form; the state is useless after it.
const STATE_TTL: Duration = Duration::from_secs(600);

pub const PROMPT: &str = "test_input_required_result_prompt";

/// The tools and the prompt, with the key that seals their `requestState`.
pub struct Mrtr {
    codec: RequestStateCodec,
}

/// What a multi-round tool has learnt so far.
#[derive(Serialize, Deserialize)]
struct Progress {
    step: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
}

impl Mrtr {
    pub fn new() -> Result<Self, RequestStateError> {
        // A fresh key per process: states from an earlier run are refused, as they should be.
        let key: [u8; 32] = rand::random();
        Ok(Self { codec: RequestStateCodec::try_new(key.to_vec())? })
    }

    pub fn tools() -> Vec<Tool> {
        let plain = |name: &str, description: &str| json!({"name": name, "description": description, "inputSchema": no_arguments()});
        wire_or_skip(vec![
            plain(
                "test_input_required_result_elicitation",
                "Asks for your name (form input request), then greets you.",
            ),
            plain(
                "test_input_required_result_sampling",
                "Asks the client's model a question (sampling input request).",
            ),
            plain("test_input_required_result_list_roots", "Asks for the client's roots (roots/list input request)."),
            plain(
                "test_input_required_result_request_state",
                "Asks for a confirmation, keeping a sealed requestState.",
            ),
            plain(
                "test_input_required_result_multiple_inputs",
                "Asks for a form, a sampling and the roots at once, with a sealed requestState.",
            ),
            plain("test_input_required_result_multi_round", "Asks two questions in two rounds (name, then colour)."),
            plain(
                "test_input_required_result_tampered_state",
                "Refuses a requestState that fails its integrity check.",
            ),
            plain("test_input_required_result_capabilities", "Asks only for what the client declared it can do."),
        ])
    }

    /// Runs `name` if it is one of these tools.
    pub async fn call(&self, name: &str, ctx: &ExtensionContext) -> Option<Result<CallToolResponse, ErrorData>> {
        if !Self::tools().iter().any(|tool| tool.name == name) {
            return None;
        }
        if !ctx.input_required_supported() {
            return Some(Ok(text_error("this tool asks its questions the 2026-07-28 way (InputRequiredResult)")));
        }
        Some(match name {
            "test_input_required_result_elicitation" => ask_name(ctx),
            "test_input_required_result_sampling" => ask_model(ctx, "What is the capital of France?"),
            "test_input_required_result_list_roots" => ask_roots(ctx),
            "test_input_required_result_request_state" | "test_input_required_result_tampered_state" => {
                self.confirm(ctx, name)
            }
            "test_input_required_result_multiple_inputs" => self.all_at_once(ctx, name),
            "test_input_required_result_multi_round" => self.two_rounds(ctx, name),
            _ => declared_only(ctx),
        })
    }

    pub fn prompts() -> Vec<Prompt> {
        wire_or_skip(vec![json!({
            "name": PROMPT,
            "description": "A prompt that first asks which context to use (form input request)."
        })])
    }

    // SEP-2322 applies to prompts/get too: the prompt is rendered once the context is known.
    pub fn get_prompt(&self, ctx: &ExtensionContext) -> Result<GetPromptResponse, ErrorData> {
        if !ctx.input_required_supported() {
            return Err(ErrorData::invalid_request("this prompt asks its question the 2026-07-28 way", None));
        }
        require(ctx, json!({"elicitation": {}}))?;
        let schema = json!({"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]});
        match form_answer(ctx, "user_context", |content| content["context"].is_string()) {
            Some(Ok(content)) => {
                let context = content["context"].as_str().unwrap_or_default();
                let text = format!("Use this context: {context}");
                Ok(GetPromptResponse::Complete(wire(
                    json!({"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}),
                )?))
            }
            Some(Err(action)) => Ok(GetPromptResponse::Complete(wire(json!({"messages": [{
                "role": "user",
                "content": {"type": "text", "text": format!("No context was given (the user chose {action}).")}
            }]}))?)),
            None => {
                let ask = form("What context should the prompt use?", schema)?;
                Ok(InputRequiredResult::from_input_requests(requests([("user_context", ask)])).into())
            }
        }
    }

    // SEP-2322 §requestState: round 2 must come back with the state of round 1.
    fn confirm(&self, ctx: &ExtensionContext, tool: &str) -> Result<CallToolResponse, ErrorData> {
        require(ctx, json!({"elicitation": {}}))?;
        let state = self.open(ctx, tool)?;
        let answer = form_answer(ctx, "confirm", |content| content["ok"].is_boolean());
        match (state, answer) {
            (Some(progress), Some(Ok(content))) if progress.step == 1 => {
                Ok(text(format!("state-ok: confirmed={}", content["ok"])))
            }
            (Some(progress), Some(Err(action))) if progress.step == 1 => {
                Ok(text(format!("state-ok: not confirmed (the user chose {action})")))
            }
            _ => {
                let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
                let ask = form("Please confirm", schema)?;
                let state = self.seal(ctx, tool, &Progress { step: 1, name: None })?;
                Ok(InputRequiredResult::new(Some(requests([("confirm", ask)])), Some(state)).into())
            }
        }
    }

    // SEP-2322: several input requests in one result; only the missing ones are asked again.
    fn all_at_once(&self, ctx: &ExtensionContext, tool: &str) -> Result<CallToolResponse, ErrorData> {
        require(ctx, json!({"elicitation": {}, "sampling": {}, "roots": {}}))?;
        let state = self.open(ctx, tool)?;
        let name = if state.is_some() { form_answer(ctx, "user_name", has_name) } else { None };
        let greeting = state.as_ref().and_then(|_| sampling_answer(ctx, "greeting"));
        let roots = state.as_ref().and_then(|_| roots_answer(ctx, "client_roots"));
        if let (Some(name), Some(greeting), Some(roots)) = (&name, &greeting, &roots) {
            let name = match name {
                Ok(content) => content["name"].as_str().unwrap_or_default().to_owned(),
                Err(action) => format!("(no name: {action})"),
            };
            return Ok(text(format!("Name: {name}; greeting: {greeting}; roots: {}", roots.join(", "))));
        }
        let mut asked = InputRequests::new();
        if name.is_none() {
            asked.insert("user_name".into(), name_form()?);
        }
        if greeting.is_none() {
            asked.insert("greeting".into(), sampling("Generate a greeting", 50)?);
        }
        if roots.is_none() {
            asked.insert("client_roots".into(), roots_request()?);
        }
        let state = self.seal(ctx, tool, &Progress { step: 1, name: None })?;
        Ok(InputRequiredResult::new(Some(asked), Some(state)).into())
    }

    // SEP-2322: a second round with a new question and a new state.
    fn two_rounds(&self, ctx: &ExtensionContext, tool: &str) -> Result<CallToolResponse, ErrorData> {
        require(ctx, json!({"elicitation": {}}))?;
        let state = self.open(ctx, tool)?;
        let step2 = || -> Result<CallToolResponse, ErrorData> {
            let schema = json!({"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]});
            Ok(InputRequiredResult::new(
                Some(requests([("step2", form("Step 2: What is your favorite color?", schema)?)])),
                None,
            )
            .into())
        };
        match state {
            Some(Progress { step: 2, name }) => match form_answer(ctx, "step2", |c| c["color"].is_string()) {
                Some(Ok(content)) => Ok(text(format!(
                    "{} likes {}.",
                    name.unwrap_or_default(),
                    content["color"].as_str().unwrap_or_default()
                ))),
                Some(Err(action)) => Ok(text(format!("No colour given (the user chose {action})."))),
                None => with_state(step2()?, self.seal(ctx, tool, &Progress { step: 2, name })?),
            },
            Some(Progress { step: 1, .. }) => match form_answer(ctx, "step1", has_name) {
                Some(Ok(content)) => {
                    let name = content["name"].as_str().map(str::to_owned);
                    with_state(step2()?, self.seal(ctx, tool, &Progress { step: 2, name })?)
                }
                Some(Err(action)) => Ok(text(format!("No name given (the user chose {action})."))),
                None => self.step1(ctx, tool),
            },
            _ => self.step1(ctx, tool),
        }
    }

    fn step1(&self, ctx: &ExtensionContext, tool: &str) -> Result<CallToolResponse, ErrorData> {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let ask = form("Step 1: What is your name?", schema)?;
        let state = self.seal(ctx, tool, &Progress { step: 1, name: None })?;
        Ok(InputRequiredResult::new(Some(requests([("step1", ask)])), Some(state)).into())
    }

    /// The state, bound to this user and this tool (associated data, never stored in it).
    fn seal(&self, ctx: &ExtensionContext, tool: &str, progress: &Progress) -> Result<String, ErrorData> {
        let bound = binding(ctx, tool);
        let options = SealOptions::new().associated_data(bound.as_bytes()).ttl(STATE_TTL);
        self.codec.seal_json_with(progress, &options).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    /// The echoed state: `None` on a first call; `-32602` when it fails verification (tampered,
    /// another user's or tool's, expired), saying nothing of what it held.
    fn open(&self, ctx: &ExtensionContext, tool: &str) -> Result<Option<Progress>, ErrorData> {
        let Some(sealed) = ctx.request_state() else { return Ok(None) };
        let bound = binding(ctx, tool);
        self.codec
            .open_json_with(sealed, bound.as_bytes())
            .map(Some)
            .map_err(|_| ErrorData::invalid_params("requestState failed verification", None))
    }
}

fn binding(ctx: &ExtensionContext, tool: &str) -> String {
    format!("{}\ntools/call\n{tool}", ctx.user.user_id)
}

fn ask_name(ctx: &ExtensionContext) -> Result<CallToolResponse, ErrorData> {
    require(ctx, json!({"elicitation": {}}))?;
    match form_answer(ctx, "user_name", has_name) {
        Some(Ok(content)) => Ok(text(format!("Hello, {}!", content["name"].as_str().unwrap_or_default()))),
        Some(Err(action)) => Ok(text(format!("No name given (the user chose {action})."))),
        None => Ok(InputRequiredResult::from_input_requests(requests([("user_name", name_form()?)])).into()),
    }
}

/// Used by `test_missing_capability` too, which asks nothing else.
pub fn ask_model(ctx: &ExtensionContext, question: &str) -> Result<CallToolResponse, ErrorData> {
    require(ctx, json!({"sampling": {}}))?;
    match sampling_answer(ctx, "capital_question") {
        Some(answer) => Ok(text(format!("LLM response: {answer}"))),
        None => {
            Ok(InputRequiredResult::from_input_requests(requests([("capital_question", sampling(question, 100)?)]))
                .into())
        }
    }
}

fn ask_roots(ctx: &ExtensionContext) -> Result<CallToolResponse, ErrorData> {
    require(ctx, json!({"roots": {}}))?;
    match roots_answer(ctx, "client_roots") {
        Some(roots) => Ok(text(format!("Roots: {}", roots.join(", ")))),
        None => Ok(InputRequiredResult::from_input_requests(requests([("client_roots", roots_request()?)])).into()),
    }
}

// SEP-2322 §capabilities: input requests only for what the client declared in this request.
fn declared_only(ctx: &ExtensionContext) -> Result<CallToolResponse, ErrorData> {
    let declared = ctx.client_capabilities();
    let mut asked = InputRequests::new();
    let mut answered = Vec::new();
    if declared.sampling.is_some() {
        match sampling_answer(ctx, "capital_question") {
            Some(answer) => answered.push(format!("sampling: {answer}")),
            None => {
                asked.insert("capital_question".into(), sampling("What is the capital of France?", 100)?);
            }
        }
    }
    if declared.elicitation.is_some() {
        match form_answer(ctx, "user_name", has_name) {
            Some(answer) => {
                answered.push(format!("elicitation: {}", answer.map(|c| c["name"].clone()).unwrap_or_default()))
            }
            None => {
                asked.insert("user_name".into(), name_form()?);
            }
        }
    }
    if declared.roots.is_some() {
        match roots_answer(ctx, "client_roots") {
            Some(roots) => answered.push(format!("roots: {}", roots.join(", "))),
            None => {
                asked.insert("client_roots".into(), roots_request()?);
            }
        }
    }
    if answered.is_empty() && asked.is_empty() {
        // Nothing this tool can ask: the client must declare at least sampling.
        require(ctx, json!({"sampling": {}}))?;
    }
    if asked.is_empty() {
        return Ok(text(format!("Answered: {}", answered.join("; "))));
    }
    Ok(InputRequiredResult::from_input_requests(asked).into())
}

/// `-32021` naming `required` unless the client declared it.
pub fn require(ctx: &ExtensionContext, required: Value) -> Result<(), ErrorData> {
    ctx.require_client_capabilities(wire::<ClientCapabilities>(required)?)
}

/// The accepted content of the form at `key` if `valid` holds for it; `Err(action)` when the
/// user declined or cancelled; `None` when there is no usable answer (ask again).
pub fn form_answer(ctx: &ExtensionContext, key: &str, valid: impl Fn(&Value) -> bool) -> Option<Result<Value, String>> {
    let answer = ctx.input_responses()?.get(key)?;
    match answer.get("action").and_then(Value::as_str)? {
        "accept" => answer.get("content").filter(|content| valid(content)).cloned().map(Ok),
        action @ ("decline" | "cancel") => Some(Err(action.to_owned())),
        _ => None,
    }
}

fn has_name(content: &Value) -> bool {
    content["name"].is_string()
}

/// The text of a `CreateMessageResult` at `key` (the assistant's answer).
fn sampling_answer(ctx: &ExtensionContext, key: &str) -> Option<String> {
    let answer = ctx.input_responses()?.get(key)?;
    if answer.get("role").and_then(Value::as_str) != Some("assistant") {
        return None;
    }
    // SEP-1577: one content block, or several.
    let content = answer.get("content")?;
    let block = content.as_array().and_then(|blocks| blocks.first()).unwrap_or(content);
    block.get("text").and_then(Value::as_str).map(str::to_owned)
}

/// The root URIs of a `ListRootsResult` at `key`.
fn roots_answer(ctx: &ExtensionContext, key: &str) -> Option<Vec<String>> {
    let roots = ctx.input_responses()?.get(key)?.get("roots")?.as_array()?;
    roots.iter().map(|root| root.get("uri").and_then(Value::as_str).map(str::to_owned)).collect()
}

pub fn name_form() -> Result<InputRequest, ErrorData> {
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    form("What is your name?", schema)
}

pub fn form(message: &str, schema: Value) -> Result<InputRequest, ErrorData> {
    wire(
        json!({"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": schema}}),
    )
}

fn sampling(question: &str, max_tokens: u32) -> Result<InputRequest, ErrorData> {
    wire(json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": question}}],
        "maxTokens": max_tokens
    }}))
}

fn roots_request() -> Result<InputRequest, ErrorData> {
    wire(json!({"method": "roots/list"}))
}

pub fn requests<const N: usize>(entries: [(&str, InputRequest); N]) -> InputRequests {
    entries.into_iter().map(|(key, request)| (key.to_owned(), request)).collect::<BTreeMap<_, _>>()
}

fn with_state(response: CallToolResponse, state: String) -> Result<CallToolResponse, ErrorData> {
    match response {
        CallToolResponse::InputRequired(result) => {
            Ok(InputRequiredResult::new(result.input_requests, Some(state)).into())
        }
        other => Ok(other),
    }
}

fn text(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(text)]).into()
}

fn text_error(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(text)]).into()
}
