//! Checking an accepted answer against the form on our side (MCP 2025-11-25 client/elicitation:
//! the server SHOULD validate `content`). A client may skip validation or be wrong, so nothing
//! is used until every value fits: types, bounds, option membership, basic format checks,
//! required fields, and no keys the form did not ask for. Numbers may arrive as floats (the
//! generated schema.json and schema.ts disagree), so an integer field takes `3.0` but not `3.5`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::field::{Answer, ContentError, check_value, shown};
use super::schema::FormSchema;

/// The checked answer to a form; fields the user left empty are absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answers(BTreeMap<String, Answer>);

impl Answers {
    pub fn get(&self, name: &str) -> Option<&Answer> {
        self.0.get(name)
    }

    pub fn text(&self, name: &str) -> Option<&str> {
        match self.0.get(name) {
            Some(Answer::Text(s)) => Some(s),
            _ => None,
        }
    }

    pub fn number(&self, name: &str) -> Option<f64> {
        match self.0.get(name) {
            Some(Answer::Number(n)) => Some(*n),
            Some(Answer::Integer(n)) => Some(*n as f64),
            _ => None,
        }
    }

    pub fn integer(&self, name: &str) -> Option<i64> {
        match self.0.get(name) {
            Some(Answer::Integer(n)) => Some(*n),
            _ => None,
        }
    }

    pub fn bool(&self, name: &str) -> Option<bool> {
        match self.0.get(name) {
            Some(Answer::Bool(b)) => Some(*b),
            _ => None,
        }
    }

    pub fn choice(&self, name: &str) -> Option<&str> {
        match self.0.get(name) {
            Some(Answer::Choice(s)) => Some(s),
            _ => None,
        }
    }

    pub fn choices(&self, name: &str) -> Option<&[String]> {
        match self.0.get(name) {
            Some(Answer::Choices(list)) => Some(list),
            _ => None,
        }
    }
}

impl FormSchema {
    /// Checks `content` of an accepted answer. No content counts as an empty object (fine when
    /// nothing is required); `null` for an optional field counts as left empty.
    pub fn validate(&self, content: Option<&Value>) -> Result<Answers, ContentError> {
        let empty = serde_json::Map::new();
        let object = match content {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(object)) => object,
            Some(_) => return Err(ContentError::NotAnObject),
        };
        if let Some(unknown) = object.keys().find(|k| !self.fields().iter().any(|f| &f.name == *k)) {
            return Err(ContentError::Unknown { field: shown(unknown) });
        }
        let mut answers = BTreeMap::new();
        for field in self.fields() {
            match object.get(&field.name) {
                None | Some(Value::Null) if field.required => {
                    return Err(ContentError::Missing { field: field.name.clone() });
                }
                None | Some(Value::Null) => {}
                Some(value) => {
                    answers.insert(field.name.clone(), check_value(field, value)?);
                }
            }
        }
        Ok(Answers(answers))
    }
}

#[cfg(test)]
#[path = "content_tests.rs"]
mod tests;
