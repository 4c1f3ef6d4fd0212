use serde_json::json;

use super::*;
use crate::mcp::forms::TextFormat;

fn scopes() -> Field {
    Field::many_of("scopes", [Choice::titled("profile", "Profile"), Choice::titled("notes:read", "Read notes")])
        .title("Access")
        .items(Some(1), Some(2))
        .default(vec!["profile"])
        .required()
}

#[test]
fn every_kind_of_field_becomes_the_2025_11_25_wire_shape() {
    let form = FormSchema::new([
        Field::text("name").title("Name").length(Some(1), Some(50)).default("Ada"),
        Field::text("email").format(TextFormat::Email).required(),
        Field::text("site").format(TextFormat::Uri),
        Field::text("day").format(TextFormat::Date),
        Field::text("at").format(TextFormat::DateTime),
        Field::number("ratio").range(Some(0.0), Some(1.5)).default(0.5),
        Field::integer("count").range(Some(1.0), Some(10.0)).default(3),
        Field::boolean("ok").default(true),
        Field::one_of("colour", [Choice::new("red"), Choice::new("green")]).default("red"),
        Field::one_of("size", [Choice::titled("s", "Small"), Choice::titled("l", "Large")]),
        Field::many_of("tags", [Choice::new("a"), Choice::new("b")]).items(None, Some(2)),
        scopes(),
    ])
    .unwrap();
    let wire = form.to_json();
    assert_eq!(wire["type"], "object");
    assert_eq!(wire["required"], json!(["email", "scopes"]));
    let p = &wire["properties"];
    assert_eq!(
        p["name"],
        json!({"type": "string", "title": "Name", "minLength": 1, "maxLength": 50, "default": "Ada"})
    );
    assert_eq!(p["email"], json!({"type": "string", "format": "email"}));
    assert_eq!(p["at"]["format"], "date-time");
    assert_eq!(p["count"], json!({"type": "integer", "minimum": 1, "maximum": 10, "default": 3}));
    assert_eq!(p["ratio"]["maximum"], 1.5);
    assert_eq!(p["colour"], json!({"type": "string", "enum": ["red", "green"], "default": "red"}));
    assert_eq!(p["size"]["oneOf"], json!([{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]));
    assert_eq!(p["tags"], json!({"type": "array", "maxItems": 2, "items": {"type": "string", "enum": ["a", "b"]}}));
    assert_eq!(p["scopes"]["items"]["anyOf"][1], json!({"const": "notes:read", "title": "Read notes"}));
    assert_eq!(p["scopes"]["default"], json!(["profile"]));
    // rmcp's type carries exactly this JSON, in this field order.
    let rmcp = form.to_rmcp().unwrap();
    assert_eq!(serde_json::to_value(&rmcp).unwrap(), wire);
    let text = serde_json::to_string(&rmcp).unwrap();
    let at = |key: &str| text.find(&format!("\"{key}\":{{")).unwrap();
    assert!(
        at("name") < at("email") && at("email") < at("at") && at("tags") < at("scopes"),
        "fields in our order: {text}"
    );
}

#[test]
fn an_empty_form_is_a_plain_confirmation() {
    let form = FormSchema::new([]).unwrap();
    assert_eq!(form.to_json(), json!({"type": "object", "properties": {}}));
    assert!(form.to_rmcp().is_ok());
}

#[test]
fn fields_that_read_like_secrets_are_refused() {
    for name in
        ["password", "api_key", "apiKey", "API-Key", "access_token", "clientSecret", "pin", "card_number", "otp"]
    {
        let refused = FormSchema::new([Field::text(name)]);
        assert!(matches!(refused, Err(SchemaError::Secret { .. })), "{name}: {refused:?}");
    }
    // The title counts too, so a harmless name cannot hide the question.
    assert!(matches!(
        FormSchema::new([Field::text("answer").title("Your GitHub personal access token")]),
        Err(SchemaError::Secret { .. })
    ));
    // Ordinary fields are fine, even with look-alike letters inside words.
    for name in ["account", "scopes", "confirm", "shipping", "keyboard", "email", "username", "spinach"] {
        assert!(FormSchema::new([Field::text(name)]).is_ok(), "{name}");
    }
    // And hand-written schemas go through the same guard.
    let schema = json!({"type": "object", "properties": {"password": {"type": "string"}}});
    assert!(matches!(FormSchema::from_json(&schema), Err(SchemaError::Secret { .. })));
}

#[test]
fn nesting_pattern_and_arrays_of_objects_are_refused() {
    let nested = json!({"type": "object", "properties": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}}});
    assert!(
        matches!(FormSchema::from_json(&nested), Err(SchemaError::Nested { .. })),
        "{:?}",
        FormSchema::from_json(&nested)
    );
    let pattern = json!({"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}});
    assert!(
        matches!(FormSchema::from_json(&pattern), Err(SchemaError::Unsupported { ref keyword, .. }) if keyword == "pattern")
    );
    let objects = json!({"type": "object", "properties": {"people": {"type": "array", "items": {"type": "object", "properties": {}}}}});
    assert!(matches!(FormSchema::from_json(&objects), Err(SchemaError::Nested { .. })));
    let free_array = json!({"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "string"}}}});
    assert!(FormSchema::from_json(&free_array).is_err(), "a multi-select needs its options");
    let union = json!({"type": "object", "properties": {"x": {"type": ["string", "null"]}}});
    assert!(FormSchema::from_json(&union).is_err());
    let top = json!({"type": "object", "properties": {}, "additionalProperties": false});
    assert!(matches!(FormSchema::from_json(&top), Err(SchemaError::NotAFlatObject(_))));
    let format = json!({"type": "object", "properties": {"ip": {"type": "string", "format": "ipv4"}}});
    assert!(matches!(FormSchema::from_json(&format), Err(SchemaError::Unsupported { .. })));
}

#[test]
fn hand_written_schemas_round_trip_and_legacy_enum_names_are_read_as_titles() {
    let schema = json!({"type": "object", "properties": {
        "size": {"type": "string", "title": "Size", "enum": ["s", "l"], "enumNames": ["Small", "Large"], "default": "s"},
        "n": {"type": "integer", "minimum": 0, "maximum": 5},
        "scopes": {"type": "array", "minItems": 1, "items": {"anyOf": [{"const": "a", "title": "A"}]}}
    }, "required": ["size"]});
    let form = FormSchema::from_json(&schema).unwrap();
    let size = form.fields().iter().find(|f| f.name() == "size").unwrap();
    assert!(size.required);
    assert_eq!(size.kind, Kind::OneOf { options: vec![Choice::titled("s", "Small"), Choice::titled("l", "Large")] });
    // Sent again in the current titled form, never as enumNames.
    assert_eq!(form.to_json()["properties"]["size"]["oneOf"][1], json!({"const": "l", "title": "Large"}));
    assert!(form.to_rmcp().is_ok());
    let mismatched =
        json!({"type": "object", "properties": {"s": {"type": "string", "enum": ["a", "b"], "enumNames": ["A"]}}});
    assert!(FormSchema::from_json(&mismatched).is_err());
    let unknown_required = json!({"type": "object", "properties": {}, "required": ["ghost"]});
    assert!(FormSchema::from_json(&unknown_required).is_err());
}

#[test]
fn inconsistent_fields_are_refused_at_construction() {
    let cases = [
        Field::boolean("b").length(Some(1), None),
        Field::text("t").range(Some(0.0), None),
        Field::text("t").length(Some(5), Some(2)),
        Field::integer("i").range(Some(0.5), None),
        Field::number("n").range(Some(2.0), Some(1.0)),
        Field::number("n").range(Some(f64::NAN), None),
        Field::one_of("c", []),
        Field::one_of("c", [Choice::new("a"), Choice::new("a")]),
        Field::many_of("m", [Choice::new("a")]).items(Some(2), None),
        Field::one_of("c", [Choice::new("a")]).default("z"),
        Field::integer("i").range(Some(0.0), Some(3.0)).default(7),
        Field::text("e").format(TextFormat::Email).default("not-an-email"),
        Field::text("has space"),
        Field::text(""),
    ];
    for field in cases {
        let name = field.name().to_owned();
        assert!(FormSchema::new([field]).is_err(), "{name:?} should be refused");
    }
    assert!(FormSchema::new([Field::boolean("x"), Field::boolean("x")]).is_err(), "duplicate names");
}
