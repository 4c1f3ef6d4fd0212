use serde_json::json;

use super::*;
use crate::mcp::forms::{Choice, Field, TextFormat};

fn form() -> FormSchema {
    FormSchema::new([
        Field::text("name").length(Some(2), Some(5)),
        Field::integer("count").range(Some(1.0), Some(10.0)).required(),
        Field::number("ratio").range(Some(0.0), Some(1.0)),
        Field::boolean("ok"),
        Field::one_of("size", [Choice::new("s"), Choice::titled("l", "Large")]),
        Field::many_of("tags", [Choice::new("a"), Choice::new("b"), Choice::new("c")]).items(Some(1), Some(2)),
        Field::text("email").format(TextFormat::Email),
        Field::text("site").format(TextFormat::Uri),
        Field::text("day").format(TextFormat::Date),
        Field::text("at").format(TextFormat::DateTime),
    ])
    .unwrap()
}

fn check(content: serde_json::Value) -> Result<Answers, ContentError> {
    form().validate(Some(&content))
}

#[test]
fn a_fitting_answer_is_read_into_typed_values() {
    let answers = check(json!({
        "name": "Ada", "count": 3, "ratio": 0.25, "ok": false, "size": "l", "tags": ["a", "c"],
        "email": "ada@example.org", "site": "https://example.org/x", "day": "2024-02-29", "at": "2025-11-25T10:00:00.5+01:00"
    }))
    .unwrap();
    assert_eq!(answers.text("name"), Some("Ada"));
    assert_eq!(answers.integer("count"), Some(3));
    assert_eq!(answers.number("ratio"), Some(0.25));
    assert_eq!(answers.bool("ok"), Some(false));
    assert_eq!(answers.choice("size"), Some("l"));
    assert_eq!(answers.choices("tags"), Some(&["a".to_owned(), "c".to_owned()][..]));
    // Left empty (absent or null) is absent.
    let sparse = check(json!({"count": 1, "name": null})).unwrap();
    assert_eq!(sparse.get("name"), None);
}

#[test]
fn numbers_may_arrive_as_floats_but_an_integer_must_be_whole() {
    assert_eq!(check(json!({"count": 3.0})).unwrap().integer("count"), Some(3));
    assert!(matches!(check(json!({"count": 3.5})), Err(ContentError::WrongType { .. })));
    assert!(matches!(check(json!({"count": "3"})), Err(ContentError::WrongType { .. })));
}

#[test]
fn wrong_types_are_refused() {
    for bad in [
        json!({"count": 1, "name": 5}),
        json!({"count": 1, "ok": "yes"}),
        json!({"count": 1, "size": 1}),
        json!({"count": 1, "tags": "a"}),
        json!({"count": 1, "tags": [1]}),
        json!({"count": true}),
    ] {
        assert!(matches!(check(bad.clone()), Err(ContentError::WrongType { .. })), "{bad}");
    }
    assert_eq!(form().validate(Some(&json!(["count"]))), Err(ContentError::NotAnObject));
}

#[test]
fn values_out_of_range_are_refused() {
    for bad in [
        json!({"count": 0}),
        json!({"count": 11}),
        json!({"count": 1, "ratio": 1.01}),
        json!({"count": 1, "name": "A"}),
        json!({"count": 1, "name": "Adaline"}),
        json!({"count": 1, "tags": []}),
        json!({"count": 1, "tags": ["a", "b", "c"]}),
        json!({"count": 1, "tags": ["a", "a"]}),
    ] {
        assert!(matches!(check(bad.clone()), Err(ContentError::OutOfRange { .. })), "{bad}");
    }
}

#[test]
fn values_that_are_not_options_are_refused() {
    assert!(matches!(check(json!({"count": 1, "size": "xl"})), Err(ContentError::NotAnOption { .. })));
    // A title is not a value.
    assert!(matches!(check(json!({"count": 1, "size": "Large"})), Err(ContentError::NotAnOption { .. })));
    assert!(matches!(check(json!({"count": 1, "tags": ["a", "z"]})), Err(ContentError::NotAnOption { .. })));
}

#[test]
fn missing_required_fields_and_unknown_keys_are_refused() {
    assert_eq!(check(json!({})), Err(ContentError::Missing { field: "count".into() }));
    assert_eq!(check(json!({"count": null})), Err(ContentError::Missing { field: "count".into() }));
    assert_eq!(form().validate(None), Err(ContentError::Missing { field: "count".into() }));
    assert_eq!(check(json!({"count": 1, "extra": 1})), Err(ContentError::Unknown { field: "extra".into() }));
    // A form with nothing required takes an accept without content.
    assert_eq!(FormSchema::new([Field::boolean("b")]).unwrap().validate(None), Ok(Answers::default()));
}

#[test]
fn formats_get_basic_checks() {
    for (field, good, bad) in [
        ("email", "a.b@example.org", "ada@"),
        ("email", "x@y.io", "no at sign"),
        ("site", "urn:isbn:0451450523", "not a url"),
        ("day", "2000-02-29", "2023-02-29"),
        ("day", "2024-12-31", "2024-13-01"),
        ("at", "2025-11-25T10:00:00Z", "2025-11-25 10:00"),
        ("at", "2025-11-25t23:59:60-05:30", "2025-11-25T24:00:00Z"),
    ] {
        assert!(check(json!({"count": 1, field: good})).is_ok(), "{field}: {good}");
        assert!(
            matches!(check(json!({"count": 1, field: bad})), Err(ContentError::BadFormat { .. })),
            "{field}: {bad}"
        );
    }
}

#[test]
fn errors_do_not_echo_long_values() {
    let long = "x".repeat(500);
    let error = check(json!({"count": 1, "size": long})).unwrap_err().to_string();
    assert!(error.len() < 120, "{error}");
}
