//! Elicitation fixtures (MCP 2025-11-25 client/elicitation): form mode with the SEP-1034
//! defaults and the SEP-1330 enum variants (scenarios `tools-call-elicitation`,
//! `elicitation-sep1034-defaults`, `elicitation-sep1330-enums`), and URL mode, `-32042` and the
//! completion notification (SEP-1036, scenario `elicitation-sep1036-url-mode`).

use oauth_broker::mcp::elicitation::{URL_ELICITATION_REQUIRED, complete_notification};
use oauth_broker::mcp::extension::ExtensionContext;
use rmcp::model::{CallToolResult, ContentBlock, ElicitRequestParams, ErrorData, JsonObject, Tool};
use rmcp::service::ElicitationMode;
use serde_json::{Value, json};

use super::tools::{no_arguments, peer_error};
use super::{wire, wire_or_skip};

/// Where the URL-mode fixtures send the user: a page that does not exist, since the suite's
/// client never opens it.
const URL_PAGE: &str = "https://mcp.example.com/conformance/elicitation";

pub fn list() -> Vec<Tool> {
    let plain = |name: &str, description: &str| json!({"name": name, "description": description, "inputSchema": no_arguments()});
    wire_or_skip(vec![
        json!({
            "name": "test_elicitation",
            "description": "Asks the user for a username and an email address (form elicitation).",
            "inputSchema": {
                "type": "object",
                "properties": {"message": {"type": "string", "description": "The message to show the user"}},
                "required": ["message"]
            }
        }),
        plain("test_elicitation_sep1034_defaults", "Form elicitation whose fields all carry defaults (SEP-1034)."),
        plain("test_elicitation_sep1330_enums", "Form elicitation with every enum variant (SEP-1330)."),
        plain("test_elicitation_sep1036_url", "Asks the user to open a URL (URL-mode elicitation, SEP-1036)."),
        plain("test_elicitation_sep1036_error", "Fails with URLElicitationRequiredError (-32042, SEP-1036)."),
        plain(
            "test_elicitation_sep1036_complete",
            "URL-mode elicitation followed by notifications/elicitation/complete (SEP-1036).",
        ),
    ])
}

/// Runs `name` if it is one of these tools.
pub async fn call(
    name: &str,
    arguments: &JsonObject,
    ctx: &ExtensionContext,
) -> Option<Result<CallToolResult, ErrorData>> {
    let result = match name {
        "test_elicitation" => {
            let message = arguments.get("message").and_then(Value::as_str).unwrap_or("Please provide your information");
            form(ctx, message, user_schema(), "User response").await
        }
        "test_elicitation_sep1034_defaults" => {
            form(ctx, "Please review the defaults", defaults_schema(), "Elicitation completed").await
        }
        "test_elicitation_sep1330_enums" => {
            form(ctx, "Please choose options", enums_schema(), "Elicitation completed").await
        }
        "test_elicitation_sep1036_url" => url(ctx, false).await,
        "test_elicitation_sep1036_complete" => url(ctx, true).await,
        "test_elicitation_sep1036_error" => Err(url_required()),
        _ => return None,
    };
    Some(result)
}

async fn form(ctx: &ExtensionContext, message: &str, schema: Value, label: &str) -> Result<CallToolResult, ErrorData> {
    // Never send a mode the client did not declare (an empty `elicitation: {}` means form).
    if !ctx.request.peer.supported_elicitation_modes().contains(&ElicitationMode::Form) {
        return Ok(CallToolResult::error(vec![ContentBlock::text("the client does not support form elicitation")]));
    }
    let params: ElicitRequestParams = wire(json!({"mode": "form", "message": message, "requestedSchema": schema}))?;
    let result = ctx.request.peer.create_elicitation(params).await.map_err(peer_error)?;
    let result = serde_json::to_value(&result).unwrap_or_default();
    let action = result.get("action").and_then(Value::as_str).unwrap_or("unknown");
    let content = result.get("content").cloned().unwrap_or(Value::Null);
    Ok(CallToolResult::success(vec![ContentBlock::text(format!("{label}: action={action}, content={content}"))]))
}

async fn url(ctx: &ExtensionContext, notify_completion: bool) -> Result<CallToolResult, ErrorData> {
    if !ctx.request.peer.supported_elicitation_modes().contains(&ElicitationMode::Url) {
        return Ok(CallToolResult::error(vec![ContentBlock::text("the client does not support URL elicitation")]));
    }
    let id = uuid::Uuid::new_v4().to_string();
    let params: ElicitRequestParams = wire(json!({
        "mode": "url",
        "message": "Please open the link to complete the conformance check.",
        "url": format!("{URL_PAGE}/{id}"),
        "elicitationId": id
    }))?;
    let result = ctx.request.peer.create_elicitation(params).await.map_err(peer_error)?;
    let action = serde_json::to_value(result.action).unwrap_or_default();
    let action = action.as_str().unwrap_or("unknown").to_owned();
    if notify_completion && action == "accept" {
        // Nothing happens out of band here, so the interaction is complete at once.
        ctx.request.peer.send_notification(complete_notification(&id)).await.map_err(peer_error)?;
    }
    Ok(CallToolResult::success(vec![ContentBlock::text(format!("URL elicitation action: {action}"))]))
}

fn url_required() -> ErrorData {
    let id = uuid::Uuid::new_v4().to_string();
    ErrorData::new(
        URL_ELICITATION_REQUIRED,
        "This request requires more information.",
        Some(json!({"elicitations": [{
            "mode": "url",
            "elicitationId": id,
            "url": format!("{URL_PAGE}/{id}"),
            "message": "Please open the link to complete the conformance check."
        }]})),
    )
}

fn user_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}
        },
        "required": ["username", "email"]
    })
}

// SEP-1034: a default on every primitive type.
fn defaults_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Your name", "default": "John Doe"},
            "age": {"type": "integer", "description": "Your age", "default": 30},
            "score": {"type": "number", "description": "Your score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "Account status",
                "enum": ["active", "inactive", "pending"],
                "default": "active"
            },
            "verified": {"type": "boolean", "description": "Verified account", "default": true}
        }
    })
}

// SEP-1330: untitled and titled single-select, the deprecated `enumNames` form, and untitled and
// titled multi-select.
fn enums_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}
            ]},
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"]
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}
            ]}}
        }
    })
}
