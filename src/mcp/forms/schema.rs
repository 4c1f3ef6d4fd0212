//! Typed descriptions of a form and the `requestedSchema` they become.
//!
//! MCP 2025-11-25 client/elicitation §Form mode allows a flat object of primitive fields only:
//! strings (min/max length, format email|uri|date|date-time), numbers and integers (bounds),
//! booleans, single-select enums (untitled `enum`, titled `oneOf` of `{const, title}`) and
//! multi-select string arrays (`items.enum`, `items.anyOf`), each with an optional `default`.
//! [`FormSchema::new`] refuses anything else at construction, and [`FormSchema::from_json`]
//! reads a schema written by hand (also the deprecated `enumNames` form, for legacy schemas)
//! under the same rules: no nesting, no `pattern`, no arrays of objects.
//!
//! Form mode MUST NOT ask for secrets (passwords, API keys, tokens, payment credentials): a
//! field whose name or title reads like one is refused (see [`looks_secret`]). The guard is a
//! heuristic over names and titles; what we ask is decided in code review, and secrets only
//! ever travel through URL mode to our own pages.

use rmcp::model::ElicitationSchema;
use serde_json::{Map, Value, json};

use super::field::{Choice, Field, Kind, check_value};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    #[error("form field {field:?} would ask for a secret; secrets go through URL mode, never a form")]
    Secret { field: String },
    #[error("form field {field:?} is nested ({what}); a form is a flat object of primitive fields")]
    Nested { field: String, what: &'static str },
    #[error("form field {field:?} uses `{keyword}`, which the 2025-11-25 form subset does not have")]
    Unsupported { field: String, keyword: String },
    #[error("form field {field:?}: {reason}")]
    Invalid { field: String, reason: String },
    #[error("requestedSchema must be a flat object schema: {0}")]
    NotAFlatObject(String),
}

fn invalid(field: &str, reason: impl Into<String>) -> SchemaError {
    SchemaError::Invalid { field: field.to_owned(), reason: reason.into() }
}

/// A checked form: every field within the subset, names unique, defaults valid.
#[derive(Debug, Clone, PartialEq)]
pub struct FormSchema {
    fields: Vec<Field>,
}

impl FormSchema {
    /// Checks and builds a form. A form with no fields is allowed: accept/decline is then the
    /// whole answer.
    pub fn new(fields: impl IntoIterator<Item = Field>) -> Result<Self, SchemaError> {
        let fields: Vec<Field> = fields.into_iter().collect();
        for (i, field) in fields.iter().enumerate() {
            check_field(field)?;
            if fields[..i].iter().any(|f| f.name == field.name) {
                return Err(invalid(&field.name, "appears twice"));
            }
        }
        Ok(Self { fields })
    }

    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// The `requestedSchema` as JSON (a JSON map: keys sorted; [`Self::to_rmcp`] keeps our order).
    pub fn to_json(&self) -> Value {
        let properties: Map<String, Value> = self.fields.iter().map(|f| (f.name.clone(), field_json(f))).collect();
        let mut schema = json!({"type": "object", "properties": properties});
        let required: Vec<&str> = self.fields.iter().filter(|f| f.required).map(|f| f.name.as_str()).collect();
        if !required.is_empty() {
            schema["required"] = json!(required);
        }
        schema
    }

    /// rmcp's type for `requestedSchema`, fields in our order. It is read from our JSON and
    /// must serialise back to exactly that JSON: rmcp's permissive types (a string schema
    /// ignores unknown keys) must not change what the client is asked.
    pub fn to_rmcp(&self) -> Result<ElicitationSchema, SchemaError> {
        let ours = self.to_json();
        let Value::Object(object) = ours.clone() else {
            return Err(SchemaError::NotAFlatObject("not an object".into()));
        };
        let mut schema =
            ElicitationSchema::from_json_schema(object).map_err(|e| SchemaError::NotAFlatObject(e.to_string()))?;
        // A JSON map is sorted by key; clients show fields in wire order.
        schema.property_order = Some(self.fields.iter().map(|f| f.name.clone()).collect());
        let back = serde_json::to_value(&schema).map_err(|e| SchemaError::NotAFlatObject(e.to_string()))?;
        if back != ours {
            return Err(SchemaError::NotAFlatObject(format!("rmcp would send {back} instead of {ours}")));
        }
        Ok(schema)
    }
}

fn check_field(field: &Field) -> Result<(), SchemaError> {
    let name = &field.name;
    if name.is_empty() || name.len() > 64 || !name.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) {
        return Err(invalid(name, "names are 1-64 characters of A-Z a-z 0-9 _ - ."));
    }
    if looks_secret(name) || field.title.as_deref().is_some_and(looks_secret) {
        return Err(SchemaError::Secret { field: name.clone() });
    }
    if let Some(misuse) = field.misuse {
        return Err(invalid(name, misuse));
    }
    match &field.kind {
        Kind::Text { min_length, max_length, .. } => {
            if let (Some(min), Some(max)) = (min_length, max_length)
                && min > max
            {
                return Err(invalid(name, "minLength is above maxLength"));
            }
        }
        Kind::Number { integer, minimum, maximum } => {
            for bound in [minimum, maximum].into_iter().flatten() {
                if !bound.is_finite() || (*integer && (bound.fract() != 0.0 || bound.abs() > 9.0e15)) {
                    return Err(invalid(name, "bounds must be finite (and whole for an integer)"));
                }
            }
            if let (Some(min), Some(max)) = (minimum, maximum)
                && min > max
            {
                return Err(invalid(name, "minimum is above maximum"));
            }
        }
        Kind::Boolean => {}
        Kind::OneOf { options } => check_options(name, options)?,
        Kind::ManyOf { options, min_items, max_items } => {
            check_options(name, options)?;
            if let (Some(min), Some(max)) = (min_items, max_items)
                && min > max
            {
                return Err(invalid(name, "minItems is above maxItems"));
            }
            if min_items.is_some_and(|min| min > options.len() as u64) {
                return Err(invalid(name, "minItems is above the number of options"));
            }
        }
    }
    if let Some(default) = &field.default {
        check_value(field, default).map_err(|e| invalid(name, format!("invalid default: {e}")))?;
    }
    Ok(())
}

fn check_options(name: &str, options: &[Choice]) -> Result<(), SchemaError> {
    if options.is_empty() {
        return Err(invalid(name, "a select needs at least one option"));
    }
    for (i, option) in options.iter().enumerate() {
        if option.value.is_empty() {
            return Err(invalid(name, "option values must not be empty"));
        }
        if options[..i].iter().any(|o| o.value == option.value) {
            return Err(invalid(name, format!("option {:?} appears twice", option.value)));
        }
    }
    Ok(())
}

/// Words that mark a request for a secret, matched inside the name with separators removed
/// (`api_key`, `apiKey` and `API-Key` all read `apikey`).
const SECRET_FRAGMENTS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "credential",
    "creditcard",
    "cardnumber",
    "securitycode",
    "mfacode",
    "otpcode",
];

/// Short words that mark a secret only as a whole word (`pin`, but not `shipping`).
const SECRET_WORDS: &[&str] = &["pin", "otp", "totp", "cvv", "cvc", "ssn", "pwd", "pass", "key"];

/// Whether a field name or title reads like a request for a secret.
pub fn looks_secret(text: &str) -> bool {
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if !c.is_alphanumeric() {
            words.push(std::mem::take(&mut current));
            previous_lower = false;
            continue;
        }
        // camelCase boundary: "apiKey" → "api", "key".
        if c.is_uppercase() && previous_lower {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    words.push(current);
    words.retain(|w| !w.is_empty());
    let joined: String = words.concat();
    SECRET_FRAGMENTS.iter().any(|f| joined.contains(f)) || words.iter().any(|w| SECRET_WORDS.contains(&w.as_str()))
}

fn options_json(options: &[Choice]) -> Vec<Value> {
    options.iter().map(|o| json!({"const": o.value, "title": o.title.as_deref().unwrap_or(&o.value)})).collect()
}

fn values_json(options: &[Choice]) -> Vec<&str> {
    options.iter().map(|o| o.value.as_str()).collect()
}

fn is_titled(options: &[Choice]) -> bool {
    options.iter().any(|o| o.title.is_some())
}

/// Integers go on the wire as JSON integers (rmcp reads integer bounds as `i64`).
fn number_json(value: f64, integer: bool) -> Value {
    if integer { json!(value as i64) } else { json!(value) }
}

fn field_json(field: &Field) -> Value {
    let mut out = Map::new();
    let mut put = |key: &str, value: Value| {
        out.insert(key.to_owned(), value);
    };
    match &field.kind {
        Kind::Text { min_length, max_length, format } => {
            put("type", json!("string"));
            min_length.map(|v| put("minLength", json!(v)));
            max_length.map(|v| put("maxLength", json!(v)));
            format.map(|f| put("format", json!(f.as_str())));
        }
        Kind::Number { integer, minimum, maximum } => {
            put("type", json!(if *integer { "integer" } else { "number" }));
            minimum.map(|v| put("minimum", number_json(v, *integer)));
            maximum.map(|v| put("maximum", number_json(v, *integer)));
        }
        Kind::Boolean => put("type", json!("boolean")),
        Kind::OneOf { options } => {
            put("type", json!("string"));
            if is_titled(options) {
                put("oneOf", json!(options_json(options)));
            } else {
                put("enum", json!(values_json(options)));
            }
        }
        Kind::ManyOf { options, min_items, max_items } => {
            put("type", json!("array"));
            min_items.map(|v| put("minItems", json!(v)));
            max_items.map(|v| put("maxItems", json!(v)));
            if is_titled(options) {
                put("items", json!({"anyOf": options_json(options)}));
            } else {
                put("items", json!({"type": "string", "enum": values_json(options)}));
            }
        }
    }
    if let Some(title) = &field.title {
        put("title", json!(title));
    }
    if let Some(description) = &field.description {
        put("description", json!(description));
    }
    if let Some(default) = &field.default {
        let default = match (&field.kind, default.as_f64()) {
            (Kind::Number { integer, .. }, Some(n)) => number_json(n, *integer),
            _ => default.clone(),
        };
        put("default", default);
    }
    Value::Object(out)
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
