//! Reading a hand-written `requestedSchema` (for example one an extension supplies, or a
//! legacy one using `enumNames`) into a [`FormSchema`], under the same rules as building one:
//! anything outside the 2025-11-25 subset is refused with the keyword that broke it.

use serde_json::{Map, Value, json};

use super::field::{Choice, Field, TextFormat};
use super::schema::{FormSchema, SchemaError};

fn invalid(field: &str, reason: impl Into<String>) -> SchemaError {
    SchemaError::Invalid { field: field.to_owned(), reason: reason.into() }
}

impl FormSchema {
    /// Reads a hand-written `requestedSchema`, refusing anything outside the 2025-11-25 subset.
    /// The deprecated `{type: string, enum, enumNames}` form is accepted as a titled select.
    pub fn from_json(schema: &Value) -> Result<Self, SchemaError> {
        let object = schema.as_object().ok_or_else(|| SchemaError::NotAFlatObject("not a JSON object".into()))?;
        for key in object.keys() {
            if !["$schema", "type", "title", "description", "properties", "required"].contains(&key.as_str()) {
                return Err(SchemaError::NotAFlatObject(format!("unsupported keyword `{key}`")));
            }
        }
        if object.get("type") != Some(&json!("object")) {
            return Err(SchemaError::NotAFlatObject("`type` must be \"object\"".into()));
        }
        let properties = object
            .get("properties")
            .and_then(Value::as_object)
            .ok_or_else(|| SchemaError::NotAFlatObject("`properties` must be an object".into()))?;
        let required: Vec<&str> = match object.get("required") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().ok_or_else(|| SchemaError::NotAFlatObject("`required` lists names".into())))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(SchemaError::NotAFlatObject("`required` must be an array".into())),
        };
        if let Some(unknown) = required.iter().find(|r| !properties.contains_key(**r)) {
            return Err(SchemaError::NotAFlatObject(format!("`required` names {unknown:?}, which is not a property")));
        }
        let fields = properties
            .iter()
            .map(|(name, property)| {
                let mut field = parse_property(name, property)?;
                field.required = required.contains(&name.as_str());
                Ok(field)
            })
            .collect::<Result<Vec<_>, SchemaError>>()?;
        Self::new(fields)
    }
}

fn parse_property(name: &str, property: &Value) -> Result<Field, SchemaError> {
    let object = property.as_object().ok_or_else(|| invalid(name, "a property must be a JSON object"))?;
    let nested = |what| SchemaError::Nested { field: name.to_owned(), what };
    if object.contains_key("properties") {
        return Err(nested("it has `properties`"));
    }
    for keyword in ["pattern", "$ref", "allOf", "anyOf", "not", "if", "additionalProperties", "const"] {
        if object.contains_key(keyword) {
            return Err(SchemaError::Unsupported { field: name.to_owned(), keyword: keyword.to_owned() });
        }
    }
    let kind = match object.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(_) => return Err(invalid(name, "`type` must be one type name")),
        None => return Err(invalid(name, "`type` is missing")),
    };
    let allowed: &[&str] = match kind {
        "object" => return Err(nested("type object")),
        "string" => &["minLength", "maxLength", "format", "enum", "enumNames", "oneOf"],
        "number" | "integer" => &["minimum", "maximum"],
        "boolean" => &[],
        "array" => &["items", "minItems", "maxItems"],
        other => return Err(invalid(name, format!("type {other:?} is not allowed in a form"))),
    };
    for key in object.keys() {
        if !["type", "title", "description", "default"].contains(&key.as_str()) && !allowed.contains(&key.as_str()) {
            return Err(SchemaError::Unsupported { field: name.to_owned(), keyword: key.clone() });
        }
    }
    let mut field = match kind {
        "string" => parse_string(name, object)?,
        "number" => Field::number(name).range(float(name, object, "minimum")?, float(name, object, "maximum")?),
        "integer" => Field::integer(name).range(float(name, object, "minimum")?, float(name, object, "maximum")?),
        "boolean" => Field::boolean(name),
        _ => parse_array(name, object)?,
    };
    field.title = text(name, object, "title")?;
    field.description = text(name, object, "description")?;
    field.default = object.get("default").cloned();
    Ok(field)
}

fn parse_string(name: &str, object: &Map<String, Value>) -> Result<Field, SchemaError> {
    if let Some(one_of) = object.get("oneOf") {
        return Ok(Field::one_of(name, titled_options(name, one_of)?));
    }
    if let Some(values) = object.get("enum") {
        let values = strings(name, values, "enum")?;
        // Deprecated (SEP-1330) but still sent by older servers and clients.
        let options = match object.get("enumNames") {
            Some(names) => {
                let names = strings(name, names, "enumNames")?;
                if names.len() != values.len() {
                    return Err(invalid(name, "`enumNames` must name every `enum` value"));
                }
                values.into_iter().zip(names).map(|(v, t)| Choice::titled(v, t)).collect()
            }
            None => values.into_iter().map(Choice::new).collect::<Vec<_>>(),
        };
        return Ok(Field::one_of(name, options));
    }
    if object.contains_key("enumNames") {
        return Err(invalid(name, "`enumNames` without `enum`"));
    }
    let format = match object.get("format") {
        None => None,
        Some(Value::String(f)) => Some(
            TextFormat::parse(f)
                .ok_or_else(|| SchemaError::Unsupported { field: name.to_owned(), keyword: format!("format {f:?}") })?,
        ),
        Some(_) => return Err(invalid(name, "`format` must be a string")),
    };
    let mut field = Field::text(name).length(count(name, object, "minLength")?, count(name, object, "maxLength")?);
    if let Some(format) = format {
        field = field.format(format);
    }
    Ok(field)
}

fn parse_array(name: &str, object: &Map<String, Value>) -> Result<Field, SchemaError> {
    let items = object.get("items").and_then(Value::as_object).ok_or_else(|| invalid(name, "`items` is missing"))?;
    if items.get("type") == Some(&json!("object")) || items.contains_key("properties") {
        return Err(SchemaError::Nested { field: name.to_owned(), what: "an array of objects" });
    }
    let options = if let Some(any_of) = items.get("anyOf").or_else(|| items.get("oneOf")) {
        titled_options(name, any_of)?
    } else if items.get("type") == Some(&json!("string")) && items.contains_key("enum") {
        strings(name, items.get("enum").unwrap_or(&Value::Null), "enum")?.into_iter().map(Choice::new).collect()
    } else {
        return Err(invalid(name, "a multi-select's items are {type: string, enum} or {anyOf: [{const, title}]}"));
    };
    if let Some(extra) = items.keys().find(|k| !["type", "enum", "anyOf", "oneOf"].contains(&k.as_str())) {
        return Err(SchemaError::Unsupported { field: name.to_owned(), keyword: format!("items.{extra}") });
    }
    let min = object.get("minItems").map(|v| v.as_u64().ok_or_else(|| invalid(name, "minItems"))).transpose()?;
    let max = object.get("maxItems").map(|v| v.as_u64().ok_or_else(|| invalid(name, "maxItems"))).transpose()?;
    Ok(Field::many_of(name, options).items(min, max))
}

fn titled_options(name: &str, value: &Value) -> Result<Vec<Choice>, SchemaError> {
    let list = value.as_array().ok_or_else(|| invalid(name, "options must be an array"))?;
    list.iter()
        .map(|option| {
            let object = option.as_object().ok_or_else(|| invalid(name, "each option is {const, title}"))?;
            if object.keys().any(|k| k != "const" && k != "title") {
                return Err(invalid(name, "each option is {const, title}"));
            }
            let value = object.get("const").and_then(Value::as_str).ok_or_else(|| invalid(name, "option const"))?;
            let title = object.get("title").and_then(Value::as_str).ok_or_else(|| invalid(name, "option title"))?;
            Ok(Choice::titled(value, title))
        })
        .collect()
}

fn strings(name: &str, value: &Value, what: &str) -> Result<Vec<String>, SchemaError> {
    value
        .as_array()
        .and_then(|items| items.iter().map(|v| v.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>())
        .ok_or_else(|| invalid(name, format!("`{what}` must be an array of strings")))
}

fn text(name: &str, object: &Map<String, Value>, key: &str) -> Result<Option<String>, SchemaError> {
    match object.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(name, format!("`{key}` must be a string"))),
    }
}

fn float(name: &str, object: &Map<String, Value>, key: &str) -> Result<Option<f64>, SchemaError> {
    object.get(key).map(|v| v.as_f64().ok_or_else(|| invalid(name, format!("`{key}` must be a number")))).transpose()
}

fn count(name: &str, object: &Map<String, Value>, key: &str) -> Result<Option<u32>, SchemaError> {
    object
        .get(key)
        .map(|v| {
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| invalid(name, format!("`{key}` must be a small whole number")))
        })
        .transpose()
}
