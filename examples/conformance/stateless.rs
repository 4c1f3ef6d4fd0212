//! The diagnostic tools of the stateless scenario (`server-stateless`, MCP 2026-07-28, SEP-2575):
//! a tool that needs an undeclared capability (`-32021`), one whose request stream may carry
//! only notifications before its `InputRequiredResult`, one that logs only when the request asked
//! for a `logLevel`, and a hook that changes the prompt list (`subscriptions/listen` then hears
//! `notifications/prompts/list_changed`).

use std::sync::atomic::{AtomicBool, Ordering};

use oauth_broker::mcp::extension::ExtensionContext;
use oauth_broker::mcp::logging::LogLevel;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, ErrorData, InputRequiredResult, Prompt, Tool};
use serde_json::json;

use super::mrtr::{ask_model, form_answer, name_form, requests, require};
use super::tools::no_arguments;
use super::wire_or_skip;

/// The prompt [`Stateless::toggle_prompt`] adds and removes.
pub const DYNAMIC_PROMPT: &str = "test_dynamic_prompt";

/// Whether the dynamic prompt is listed now.
#[derive(Default)]
pub struct Stateless {
    dynamic_prompt: AtomicBool,
}

impl Stateless {
    pub fn tools() -> Vec<Tool> {
        let plain = |name: &str, description: &str| json!({"name": name, "description": description, "inputSchema": no_arguments()});
        wire_or_skip(vec![
            plain("test_missing_capability", "Needs sampling: -32021 unless the request declares it."),
            plain(
                "test_streaming_elicitation",
                "Asks for your name with an InputRequiredResult, never a nested request.",
            ),
            plain("test_logging_tool", "Logs three info messages, only if the request asked for a logLevel."),
            plain("test_trigger_prompt_change", "Adds or removes the prompt test_dynamic_prompt."),
            plain("test_trigger_tool_change", "Announces a change of the tool list to listening clients."),
        ])
    }

    /// Runs `name` if it is one of these tools.
    pub async fn call(&self, name: &str, ctx: &ExtensionContext) -> Option<Result<CallToolResponse, ErrorData>> {
        let result = match name {
            // SEP-2575 §capabilities: a server must not rely on what the client did not declare.
            "test_missing_capability" => match require(ctx, json!({"sampling": {}})) {
                Ok(()) if !ctx.input_required_supported() => Ok(needs_2026()),
                Ok(()) => ask_model(ctx, "Say hello."),
                Err(missing) => Err(missing),
            },
            "test_streaming_elicitation" => streaming_elicitation(ctx),
            "test_logging_tool" => {
                for message in ["Logging tool started", "Logging tool working", "Logging tool done"] {
                    ctx.log(LogLevel::Info, json!(message)).await;
                }
                Ok(text("Logging tool executed"))
            }
            "test_trigger_prompt_change" => {
                let listed = !self.dynamic_prompt.fetch_xor(true, Ordering::SeqCst);
                ctx.prompts_changed();
                Ok(text(format!("{DYNAMIC_PROMPT} is {}", if listed { "listed" } else { "gone" })))
            }
            // SEP-2575: a server that declares tools.listChanged tells listen streams.
            "test_trigger_tool_change" => {
                ctx.tools_changed();
                Ok(text("the tool list change was announced".to_owned()))
            }
            _ => return None,
        };
        Some(result)
    }

    /// The dynamic prompt while it is listed.
    pub fn prompts(&self) -> Vec<Prompt> {
        if !self.dynamic_prompt.load(Ordering::SeqCst) {
            return Vec::new();
        }
        wire_or_skip(vec![json!({"name": DYNAMIC_PROMPT, "description": "Listed while the hook says so."})])
    }
}

// SEP-2575 §streams: in 2026-07-28 the server asks through the result, so the request's
// stream holds notifications and the answer only.
fn streaming_elicitation(ctx: &ExtensionContext) -> Result<CallToolResponse, ErrorData> {
    if !ctx.input_required_supported() {
        return Ok(needs_2026());
    }
    require(ctx, json!({"elicitation": {}}))?;
    match form_answer(ctx, "user_name", |content| content["name"].is_string()) {
        Some(Ok(content)) => Ok(text(format!("Hello, {}!", content["name"].as_str().unwrap_or_default()))),
        Some(Err(action)) => Ok(text(format!("No name given (the user chose {action})."))),
        None => Ok(InputRequiredResult::from_input_requests(requests([("user_name", name_form()?)])).into()),
    }
}

fn needs_2026() -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text("this tool asks its questions the 2026-07-28 way")]).into()
}

fn text(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(text)]).into()
}
