//! Prompts, resources, a resource template and completions (scenarios `prompts-*`,
//! `resources-*`, `completion-complete`; MCP 2025-11-25 server/prompts, server/resources,
//! server/utilities/completion).

use std::collections::BTreeMap;

use rmcp::model::{
    CompleteRequestParams, CompletionInfo, ErrorData, GetPromptResult, Prompt, ReadResourceResult, Reference, Resource,
    ResourceTemplate,
};
use serde_json::json;

use super::{RED_PIXEL_PNG, wire, wire_or_skip};

const TEMPLATE: &str = "test://template/{id}/data";

pub fn prompts() -> Vec<Prompt> {
    wire_or_skip(vec![
        json!({"name": "test_simple_prompt", "description": "A simple prompt without arguments."}),
        json!({
            "name": "test_prompt_with_arguments",
            "description": "A prompt that inserts its two arguments.",
            "arguments": [
                {"name": "arg1", "description": "First test argument", "required": true},
                {"name": "arg2", "description": "Second test argument", "required": true}
            ]
        }),
        json!({
            "name": "test_prompt_with_embedded_resource",
            "description": "A prompt that embeds the resource it is given.",
            "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": true}]
        }),
        json!({"name": "test_prompt_with_image", "description": "A prompt with an image."}),
    ])
}

/// `None` when `name` is not one of these prompts. Required arguments were checked by the
/// broker's catalogue; they are checked again here so a direct call cannot slip through.
pub fn get_prompt(name: &str, arguments: &BTreeMap<String, String>) -> Option<Result<GetPromptResult, ErrorData>> {
    let argument = |key: &str| {
        arguments
            .get(key)
            .cloned()
            .ok_or_else(|| ErrorData::invalid_params(format!("missing required argument: {key}"), None))
    };
    let messages = match name {
        "test_simple_prompt" => {
            Ok(json!([user(json!({"type": "text", "text": "This is a simple prompt for testing."}))]))
        }
        "test_prompt_with_arguments" => argument("arg1").and_then(|arg1| {
            let arg2 = argument("arg2")?;
            let text = format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'");
            Ok(json!([user(json!({"type": "text", "text": text}))]))
        }),
        "test_prompt_with_embedded_resource" => argument("resourceUri").map(|uri| {
            json!([
                user(json!({"type": "resource", "resource": {
                    "uri": uri,
                    "mimeType": "text/plain",
                    "text": "Embedded resource content for testing."
                }})),
                user(json!({"type": "text", "text": "Please process the embedded resource above."}))
            ])
        }),
        "test_prompt_with_image" => Ok(json!([
            user(json!({"type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png"})),
            user(json!({"type": "text", "text": "Please analyze the image above."}))
        ])),
        _ => return None,
    };
    Some(messages.and_then(|messages| wire(json!({"messages": messages}))))
}

/// The prompt `test_trigger_prompt_change` adds and removes.
pub fn dynamic_prompt() -> Result<rmcp::model::GetPromptResponse, ErrorData> {
    let messages = json!([user(json!({"type": "text", "text": "This prompt comes and goes."}))]);
    wire::<GetPromptResult>(json!({"messages": messages})).map(Into::into)
}

fn user(content: serde_json::Value) -> serde_json::Value {
    json!({"role": "user", "content": content})
}

pub fn resources() -> Vec<Resource> {
    wire_or_skip(vec![
        json!({
            "uri": "test://static-text",
            "name": "static-text",
            "description": "A static text resource.",
            "mimeType": "text/plain"
        }),
        json!({
            "uri": "test://static-binary",
            "name": "static-binary",
            "description": "A static binary resource (a PNG image).",
            "mimeType": "image/png"
        }),
        json!({
            "uri": "test://watched-resource",
            "name": "watched-resource",
            "description": "A resource clients may subscribe to.",
            "mimeType": "text/plain"
        }),
    ])
}

pub fn templates() -> Vec<ResourceTemplate> {
    wire_or_skip(vec![json!({
        "uriTemplate": TEMPLATE,
        "name": "template-data",
        "description": "Data for the id in the URI.",
        "mimeType": "application/json"
    })])
}

/// `None` when `uri` is not one of these resources.
pub fn read(uri: &str) -> Option<Result<ReadResourceResult, ErrorData>> {
    let contents = match uri {
        "test://static-text" => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."})
        }
        "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": RED_PIXEL_PNG}),
        "test://watched-resource" => json!({"uri": uri, "mimeType": "text/plain", "text": "Watched resource content."}),
        _ => {
            let id = template_id(uri)?;
            let data = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
            json!({"uri": uri, "mimeType": "application/json", "text": data.to_string()})
        }
    };
    Some(wire(json!({"contents": [contents]})))
}

/// The `{id}` of `test://template/{id}/data`: one non-empty path segment.
fn template_id(uri: &str) -> Option<&str> {
    let id = uri.strip_prefix("test://template/")?.strip_suffix("/data")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// Values that start with what the user typed, for `test_prompt_with_arguments` and the
/// template's `id`.
pub fn complete(request: &CompleteRequestParams) -> Option<Result<CompletionInfo, ErrorData>> {
    let candidates: &[&str] = match (&request.r#ref, request.argument.name.as_str()) {
        (Reference::Prompt(prompt), "arg1" | "arg2") if prompt.name == "test_prompt_with_arguments" => {
            &["paris", "park", "party", "test", "testing"]
        }
        (Reference::Resource(resource), "id") if resource.uri == TEMPLATE => &["1", "123", "42"],
        _ => return None,
    };
    let typed = request.argument.value.as_str();
    let values = candidates.iter().filter(|c| c.starts_with(typed)).map(|c| (*c).to_owned()).collect();
    Some(CompletionInfo::new(values).map_err(|e| ErrorData::internal_error(e, None)))
}
