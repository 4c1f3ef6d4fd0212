//! Tools that return each content type, log, report progress, fail, sample, and carry a JSON
//! Schema 2020-12 input schema, and a parameter sent as a header too (scenarios `tools-*`,
//! `json-schema-2020-12`, `server-sse-polling`, `http-custom-header-server-validation`).

// Logging and sampling are deprecated by SEP-2577 (2026-07-28) but are part of 2025-11-25.
#![allow(deprecated)]

use std::time::Duration;

use oauth_broker::mcp::extension::ExtensionContext;
use rmcp::model::{
    CallToolResult, ContentBlock, CreateMessageRequestParams, ErrorData, JsonObject, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, Tool,
};
use serde_json::{Value, json};

use super::{RED_PIXEL_PNG, silent_wav, wire, wire_or_skip};

/// MCP 2025-11-25 server/tools: a tool without arguments still has an object schema.
pub fn no_arguments() -> Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

pub fn list() -> Vec<Tool> {
    let plain = |name: &str, description: &str| json!({"name": name, "description": description, "inputSchema": no_arguments()});
    wire_or_skip(vec![
        plain("test_simple_text", "Returns one text block."),
        plain("test_image_content", "Returns a 1x1 red PNG image."),
        plain("test_audio_content", "Returns a short silent WAV clip."),
        plain("test_embedded_resource", "Returns an embedded text resource."),
        plain("test_multiple_content_types", "Returns text, an image and an embedded resource."),
        plain("test_tool_with_logging", "Sends three info-level log messages while it runs."),
        plain("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100 when given a progress token."),
        plain("test_error_handling", "Always fails with a tool execution error (isError)."),
        plain("test_reconnection", "Waits briefly, then answers on its SSE stream (SEP-1699 polling check)."),
        json!({
            "name": "test_sampling",
            "description": "Asks the client's model to answer a prompt (sampling/createMessage).",
            "inputSchema": {
                "type": "object",
                "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"}},
                "required": ["prompt"]
            }
        }),
        // SEP-2243: a parameter the client also sends as the `Mcp-Param-Region` header.
        json!({
            "name": "test_custom_header",
            "description": "Echoes its region, which travels in the Mcp-Param-Region header too.",
            "inputSchema": {
                "type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                "required": ["region"]
            }
        }),
        // SEP-1613 and SEP-2106: `$anchor` in `$defs`, `allOf`/`anyOf`, `if`/`then`/`else`.
        json!({
            "name": "json_schema_2020_12_tool",
            "description": "Tool with JSON Schema 2020-12 features",
            "inputSchema": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "$anchor": "addressDef",
                        "type": "object",
                        "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
                    }
                },
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"}
                },
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false
            }
        }),
    ])
}

/// Runs `name` if it is one of these tools.
pub async fn call(
    name: &str,
    arguments: &JsonObject,
    ctx: &ExtensionContext,
) -> Option<Result<CallToolResult, ErrorData>> {
    let result = match name {
        "test_simple_text" => Ok(text("This is a simple text response for testing.")),
        "test_image_content" => Ok(CallToolResult::success(vec![ContentBlock::image(RED_PIXEL_PNG, "image/png")])),
        "test_audio_content" => Ok(CallToolResult::success(vec![ContentBlock::audio(silent_wav(), "audio/wav")])),
        "test_embedded_resource" => wire(json!({"content": [{
            "type": "resource",
            "resource": {
                "uri": "test://embedded-resource",
                "mimeType": "text/plain",
                "text": "This is an embedded resource content."
            }
        }]})),
        "test_multiple_content_types" => wire(json!({"content": [
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png"},
            {"type": "resource", "resource": {
                "uri": "test://mixed-content-resource",
                "mimeType": "application/json",
                "text": json!({"test": "data", "value": 123}).to_string()
            }}
        ]})),
        "test_tool_with_logging" => with_logging(ctx).await,
        "test_tool_with_progress" => with_progress(ctx).await,
        "test_error_handling" => {
            Ok(CallToolResult::error(vec![ContentBlock::text("This tool intentionally returns an error for testing")]))
        }
        "test_reconnection" => {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok(text("Reconnection test completed."))
        }
        "test_sampling" => sampling(arguments, ctx).await,
        "test_custom_header" => {
            Ok(text(format!("Region: {}", arguments.get("region").and_then(Value::as_str).unwrap_or_default())))
        }
        "json_schema_2020_12_tool" => Ok(text(format!("Received: {}", Value::Object(arguments.clone())))),
        _ => return None,
    };
    Some(result)
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

// MCP 2025-11-25 server/utilities/logging: three messages, 50 ms apart.
async fn with_logging(ctx: &ExtensionContext) -> Result<CallToolResult, ErrorData> {
    let messages = ["Tool execution started", "Tool processing data", "Tool execution completed"];
    for (i, message) in messages.into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut param = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(message));
        param.logger = Some("conformance".into());
        ctx.notify_log(param).await.map_err(peer_error)?;
    }
    Ok(text("Tool with logging executed successfully"))
}

// MCP 2025-11-25 basic/utilities/progress: increasing values, only with a progress token.
async fn with_progress(ctx: &ExtensionContext) -> Result<CallToolResult, ErrorData> {
    let token = ctx.request.meta.get_progress_token();
    for (i, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if let Some(token) = &token {
            let mut param = ProgressNotificationParam::new(token.clone(), progress);
            param.total = Some(100.0);
            ctx.request.peer.notify_progress(param).await.map_err(peer_error)?;
        }
    }
    Ok(text("Tool with progress executed successfully"))
}

// MCP 2025-11-25 client/sampling.
async fn sampling(arguments: &JsonObject, ctx: &ExtensionContext) -> Result<CallToolResult, ErrorData> {
    let Some(prompt) = arguments.get("prompt").and_then(Value::as_str) else {
        return Ok(CallToolResult::error(vec![ContentBlock::text("missing required argument: prompt")]));
    };
    let declared = ctx.request.peer.peer_info().is_some_and(|info| info.capabilities.sampling.is_some());
    if !declared {
        return Ok(CallToolResult::error(vec![ContentBlock::text("the client does not support sampling")]));
    }
    let params: CreateMessageRequestParams = wire(json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": 100
    }))?;
    let result = ctx.request.peer.create_message(params).await.map_err(peer_error)?;
    let answer = serde_json::to_value(&result).unwrap_or_default();
    let answer = answer.pointer("/content/text").and_then(Value::as_str).unwrap_or("(no text)");
    Ok(text(format!("LLM response: {answer}")))
}

pub fn peer_error(error: rmcp::service::ServiceError) -> ErrorData {
    ErrorData::internal_error(format!("request to the client failed: {error}"), None)
}
