//! The served tool list, with each tool's `inputSchema` compiled once, and the check every
//! `tools/call` passes before its tool runs.
//!
//! MCP 2025-11-25 server/tools: "Servers MUST validate all tool inputs". The schema a client
//! was shown is the contract, for the broker's tools and extension tools alike: a call that
//! breaks it is refused with JSON-RPC `-32602` whose message names the field ("account: longer
//! than 128 characters"), and `data.errors` lists every problem found (at most
//! [`MAX_REPORTED`]). A tool whose schema does not compile is refused (fail closed) and logged
//! at start-up.

use std::collections::HashMap;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{ValidationError, Validator};
use rmcp::model::{ErrorData, JsonObject, Tool};
use serde_json::{Value, json};

/// Problems listed in one refusal.
const MAX_REPORTED: usize = 10;

pub struct ToolCatalogue {
    tools: Vec<Tool>,
    validators: HashMap<String, Result<Validator, String>>,
}

impl std::fmt::Debug for ToolCatalogue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ToolCatalogue({} tools)", self.tools.len())
    }
}

impl ToolCatalogue {
    /// Compiles every tool's input schema (the tool list does not change at run time).
    pub fn new(tools: Vec<Tool>) -> Self {
        let validators = tools
            .iter()
            .map(|tool| {
                let schema = Value::Object(tool.input_schema.as_ref().clone());
                // Formats are assertions too: a schema that says `"format": "uri"` means it.
                let compiled = jsonschema::options().should_validate_formats(true).build(&schema).map_err(|e| {
                    tracing::error!(tool = %tool.name, error = %e, "a tool's input schema does not compile; calls to it are refused");
                    e.to_string()
                });
                (tool.name.to_string(), compiled)
            })
            .collect();
        Self { tools, validators }
    }

    /// The tools, as `tools/list` shows them.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// `Ok` if `name` is unknown (the caller answers that) or its arguments fit its schema.
    pub fn check(&self, name: &str, arguments: Option<&JsonObject>) -> Result<(), ErrorData> {
        let Some(validator) = self.validators.get(name) else { return Ok(()) };
        let validator = validator
            .as_ref()
            .map_err(|_| ErrorData::internal_error(format!("tool {name} has an invalid input schema"), None))?;
        let instance = Value::Object(arguments.cloned().unwrap_or_default());
        let problems: Vec<(String, String)> =
            validator.iter_errors(&instance).take(MAX_REPORTED).map(describe).collect();
        let Some((field, problem)) = problems.first() else { return Ok(()) };
        let message = if field.is_empty() { problem.clone() } else { format!("{field}: {problem}") };
        let errors: Vec<Value> =
            problems.iter().map(|(field, problem)| json!({"field": field, "problem": problem})).collect();
        Err(ErrorData::invalid_params(message, Some(json!({"errors": errors}))))
    }
}

/// (field, problem) in words a model can act on. Never echoes the value: it may be long, and a
/// refusal is no place to repeat what a caller sent.
fn describe(error: ValidationError<'_>) -> (String, String) {
    let field = error.instance_path().segments().map(|s| s.to_string()).collect::<Vec<_>>().join(".");
    let within = |name: &str| if field.is_empty() { name.to_owned() } else { format!("{field}.{name}") };
    match error.kind() {
        ValidationErrorKind::Required { property } => {
            (within(property.as_str().unwrap_or_default()), "required".into())
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let first = unexpected.first().map(String::as_str).unwrap_or_default();
            (within(first), "not an argument of this tool".into())
        }
        ValidationErrorKind::MaxLength { limit } => (field, format!("longer than {limit} characters")),
        ValidationErrorKind::MinLength { limit } => (field, format!("shorter than {limit} characters")),
        ValidationErrorKind::MaxItems { limit } => (field, format!("more than {limit} items")),
        ValidationErrorKind::MinItems { limit } => (field, format!("fewer than {limit} items")),
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(t) => t.to_string(),
                TypeKind::Multiple(set) => set.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" or "),
            };
            (field, format!("must be of type {expected}"))
        }
        ValidationErrorKind::Enum { options } => {
            let options = match options.as_ref() {
                Value::Array(values) => {
                    values.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).collect::<Vec<_>>()
                }
                other => vec![other.to_string()],
            };
            (field, format!("must be one of: {}", options.join(", ")))
        }
        ValidationErrorKind::Pattern { pattern } => (field, format!("does not match the pattern {pattern}")),
        ValidationErrorKind::Format { format } => (field, format!("is not a valid {format}")),
        ValidationErrorKind::Maximum { limit } => (field, format!("greater than {limit}")),
        ValidationErrorKind::Minimum { limit } => (field, format!("less than {limit}")),
        _ => (field, format!("does not satisfy the schema's {} rule", error.kind().keyword())),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn catalogue() -> ToolCatalogue {
        let mut tools = crate::mcp::tools::catalogue::tools(&["demo".into(), "github".into()]);
        let schema = json!({"type": "object", "properties": {"when": {"type": "string", "format": "date"}}});
        tools.push(Tool::new("ext", "an extension tool", Arc::new(schema.as_object().cloned().unwrap())));
        let broken = json!({"type": "object", "properties": {"x": {"type": "no-such-type"}}});
        tools.push(Tool::new("broken", "a bad schema", Arc::new(broken.as_object().cloned().unwrap())));
        ToolCatalogue::new(tools)
    }

    fn refusal(name: &str, arguments: Value) -> ErrorData {
        catalogue().check(name, arguments.as_object()).expect_err("refused")
    }

    #[test]
    fn valid_arguments_and_unknown_tools_pass() {
        let c = catalogue();
        let ok = json!({"provider": "demo", "account": "work", "scopes": ["read"]});
        assert!(c.check("connect_account", ok.as_object()).is_ok());
        assert!(c.check("list_connections", None).is_ok());
        assert!(c.check("not_a_tool", json!({"x": 1}).as_object()).is_ok());
    }

    #[test]
    fn refusals_are_invalid_params_naming_the_field() {
        let e = refusal("connect_account", json!({"provider": "demo", "account": "a".repeat(1000)}));
        assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert_eq!(e.message, "account: longer than 128 characters");
        assert!(!e.data.unwrap().to_string().contains("aaaa"), "the value is not echoed");
        assert_eq!(refusal("connect_account", json!({})).message, "provider: required");
        assert_eq!(
            refusal("connect_account", json!({"provider": "demo", "scopes": "read"})).message,
            "scopes: must be of type array"
        );
        assert_eq!(
            refusal("connect_account", json!({"provider": "nope"})).message,
            "provider: must be one of: demo, github"
        );
        assert_eq!(
            refusal("connect_account", json!({"provider": "demo", "extra": 1})).message,
            "extra: not an argument of this tool"
        );
        assert_eq!(
            refusal("provider_request", json!({"provider": "demo", "method": "GET", "path": "/", "query": {"a": []}}))
                .message,
            "query.a: must be of type boolean or number or string"
        );
    }

    #[test]
    fn extension_schemas_are_enforced_and_a_broken_one_fails_closed() {
        assert_eq!(refusal("ext", json!({"when": "yesterday"})).message, "when: is not a valid date");
        assert_eq!(refusal("broken", json!({})).code, rmcp::model::ErrorCode::INTERNAL_ERROR);
    }
}
