//! Checks `prompts/get` arguments against a prompt's declared arguments (MCP 2025-11-25
//! server/prompts §Error handling: missing required arguments → -32602; servers SHOULD validate
//! prompt arguments).
//!
//! Every error is -32602 and names the argument; names the client sent are escaped and
//! shortened before they appear in a message, since they are client data.

use std::collections::BTreeMap;

use rmcp::model::{ErrorData, JsonObject, PromptArgument};
use serde_json::{Value, json};

/// Longest argument value accepted (bytes). Prompts are text for a model, not uploads.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;

/// The given values by name, once every given name is declared, every value is a string of
/// reasonable size and every required argument is present and not blank.
pub fn check(
    prompt: &str,
    declared: &[PromptArgument],
    given: Option<JsonObject>,
) -> Result<BTreeMap<String, String>, ErrorData> {
    let mut values = BTreeMap::new();
    for (name, value) in given.unwrap_or_default() {
        if !declared.iter().any(|a| a.name == name) {
            let expected: Vec<&str> = declared.iter().map(|a| a.name.as_str()).collect();
            let expected = if expected.is_empty() { "none".to_owned() } else { expected.join(", ") };
            return Err(invalid(
                format!("unknown argument {} for prompt {prompt:?}; it accepts: {expected}", shown(&name)),
                &name,
            ));
        }
        let Value::String(value) = value else {
            return Err(invalid(format!("argument {name:?} must be a string"), &name));
        };
        if value.len() > MAX_VALUE_BYTES {
            return Err(invalid(format!("argument {name:?} is longer than {MAX_VALUE_BYTES} bytes"), &name));
        }
        values.insert(name, value);
    }
    for argument in declared.iter().filter(|a| a.required == Some(true)) {
        if values.get(&argument.name).is_none_or(|v| v.trim().is_empty()) {
            return Err(invalid(format!("missing required argument {:?}", argument.name), &argument.name));
        }
    }
    Ok(values)
}

/// A client-supplied name, quoted, escaped and cut to a readable length.
pub fn shown(value: &str) -> String {
    let cut: String = value.chars().take(64).collect();
    let ellipsis = if cut.len() < value.len() { "…" } else { "" };
    format!("\"{}\"{ellipsis}", cut.escape_default())
}

fn invalid(message: String, argument: &str) -> ErrorData {
    let argument: String = argument.chars().take(64).collect();
    ErrorData::invalid_params(message, Some(json!({ "argument": argument })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared() -> Vec<PromptArgument> {
        vec![PromptArgument::new("provider").with_required(true), PromptArgument::new("scopes").with_required(false)]
    }

    fn given(value: Value) -> Option<JsonObject> {
        value.as_object().cloned()
    }

    #[test]
    fn declared_string_arguments_pass() {
        let values = check("p", &declared(), given(json!({"provider": "demo", "scopes": "profile"}))).unwrap();
        assert_eq!(values["provider"], "demo");
        assert_eq!(values["scopes"], "profile");
        assert!(check("p", &declared(), given(json!({"provider": "demo"}))).is_ok());
    }

    #[test]
    fn a_missing_required_argument_is_named() {
        for args in [None, given(json!({"scopes": "x"})), given(json!({"provider": "  "}))] {
            let error = check("p", &declared(), args).unwrap_err();
            assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
            assert!(error.message.contains("provider"), "{}", error.message);
        }
    }

    #[test]
    fn unknown_and_non_string_arguments_are_refused() {
        let error = check("p", &declared(), given(json!({"provider": "demo", "evil\n": "x"}))).unwrap_err();
        assert!(error.message.contains("unknown argument \"evil\\n\""), "{}", error.message);
        let error = check("p", &declared(), given(json!({"provider": 3}))).unwrap_err();
        assert!(error.message.contains("must be a string"));
        let error = check("p", &[], given(json!({"x": "1"}))).unwrap_err();
        assert!(error.message.contains("accepts: none"));
    }

    #[test]
    fn oversized_values_are_refused() {
        let big = "x".repeat(MAX_VALUE_BYTES + 1);
        assert!(check("p", &declared(), given(json!({"provider": big}))).is_err());
    }
}
