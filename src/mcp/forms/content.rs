//! Checking an accepted answer against the form on our side (MCP 2025-11-25 client/elicitation:
//! the server SHOULD validate `content`). A client may skip validation or be wrong, so nothing
//! is used until every value fits: types, bounds, option membership, basic format checks,
//! required fields, and no keys the form did not ask for. Numbers may arrive as floats (the
//! generated schema.json and schema.ts disagree), so an integer field takes `3.0` but not `3.5`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::schema::{Field, FormSchema, Kind, TextFormat};

/// One checked value.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Text(String),
    Number(f64),
    Integer(i64),
    Bool(bool),
    Choice(String),
    Choices(Vec<String>),
}

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

/// What is wrong with an answer; the text names the field and is safe to show.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ContentError {
    #[error("the answer is not an object of field values")]
    NotAnObject,
    #[error("{field:?} is required")]
    Missing { field: String },
    #[error("{field:?} is not a field of this form")]
    Unknown { field: String },
    #[error("{field:?} must be {expected}")]
    WrongType { field: String, expected: &'static str },
    #[error("{field:?} {reason}")]
    OutOfRange { field: String, reason: String },
    #[error("{field:?}: {value:?} is not one of the options")]
    NotAnOption { field: String, value: String },
    #[error("{field:?} is not a valid {format}")]
    BadFormat { field: String, format: &'static str },
}

/// A value shown back in an error: short, so an answer cannot flood a message.
fn shown(value: &str) -> String {
    let mut out: String = value.chars().take(40).collect();
    if value.chars().count() > 40 {
        out.push('…');
    }
    out
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

/// Checks one value against its field (also used for defaults at construction).
pub(crate) fn check_value(field: &Field, value: &Value) -> Result<Answer, ContentError> {
    let name = || field.name.clone();
    let wrong = |expected| ContentError::WrongType { field: name(), expected };
    let range = |reason: String| ContentError::OutOfRange { field: name(), reason };
    match &field.kind {
        Kind::Text { min_length, max_length, format } => {
            let text = value.as_str().ok_or_else(|| wrong("text"))?;
            let length = text.chars().count() as u64;
            if min_length.is_some_and(|min| length < u64::from(min)) {
                return Err(range(format!("must be at least {} characters", min_length.unwrap_or_default())));
            }
            if max_length.is_some_and(|max| length > u64::from(max)) {
                return Err(range(format!("must be at most {} characters", max_length.unwrap_or_default())));
            }
            if let Some(format) = format
                && !format_ok(*format, text)
            {
                return Err(ContentError::BadFormat { field: name(), format: format.as_str() });
            }
            Ok(Answer::Text(text.to_owned()))
        }
        Kind::Number { integer, minimum, maximum } => {
            let number = value.as_f64().ok_or_else(|| wrong(if *integer { "a whole number" } else { "a number" }))?;
            if *integer && (number.fract() != 0.0 || number.abs() > 9.0e15) {
                return Err(wrong("a whole number"));
            }
            if let Some(min) = minimum
                && number < *min
            {
                return Err(range(format!("must be at least {min}")));
            }
            if let Some(max) = maximum
                && number > *max
            {
                return Err(range(format!("must be at most {max}")));
            }
            Ok(if *integer { Answer::Integer(number as i64) } else { Answer::Number(number) })
        }
        Kind::Boolean => value.as_bool().map(Answer::Bool).ok_or_else(|| wrong("true or false")),
        Kind::OneOf { options } => {
            let chosen = value.as_str().ok_or_else(|| wrong("one of the options"))?;
            if !options.iter().any(|o| o.value == chosen) {
                return Err(ContentError::NotAnOption { field: name(), value: shown(chosen) });
            }
            Ok(Answer::Choice(chosen.to_owned()))
        }
        Kind::ManyOf { options, min_items, max_items } => {
            let list = value.as_array().ok_or_else(|| wrong("a list of options"))?;
            let mut chosen: Vec<String> = Vec::with_capacity(list.len());
            for item in list {
                let item = item.as_str().ok_or_else(|| wrong("a list of options"))?;
                if !options.iter().any(|o| o.value == item) {
                    return Err(ContentError::NotAnOption { field: name(), value: shown(item) });
                }
                if chosen.iter().any(|c| c == item) {
                    return Err(range(format!("lists {:?} twice", shown(item))));
                }
                chosen.push(item.to_owned());
            }
            let count = chosen.len() as u64;
            if let Some(min) = min_items
                && count < *min
            {
                return Err(range(format!("needs at least {min} selected")));
            }
            if let Some(max) = max_items
                && count > *max
            {
                return Err(range(format!("allows at most {max} selected")));
            }
            Ok(Answer::Choices(chosen))
        }
    }
}

fn format_ok(format: TextFormat, text: &str) -> bool {
    match format {
        TextFormat::Email => email_ok(text),
        TextFormat::Uri => url::Url::parse(text).is_ok(),
        TextFormat::Date => date_ok(text),
        TextFormat::DateTime => date_time_ok(text),
    }
}

/// `local@domain.tld`, no spaces: a basic check, not RFC 5322.
fn email_ok(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else { return false };
    !local.is_empty()
        && !text.chars().any(char::is_whitespace)
        && domain.contains('.')
        && domain.split('.').all(|label| !label.is_empty() && !label.contains('@'))
}

fn digits(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// RFC 3339 full-date: `YYYY-MM-DD`, a real calendar day.
fn date_ok(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    let [y, m, d] = parts.as_slice() else { return false };
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return false;
    }
    let (Some(year), Some(month), Some(day)) = (digits(y), digits(m), digits(d)) else { return false };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
fn date_time_ok(text: &str) -> bool {
    let Some((date, time)) = text.split_once(['T', 't']) else { return false };
    if !date_ok(date) {
        return false;
    }
    let (clock, offset) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, None)
    } else if let Some(at) = time.rfind(['+', '-']) {
        (&time[..at], Some(&time[at + 1..]))
    } else {
        return false;
    };
    let clock = match clock.split_once('.') {
        Some((whole, fraction)) if !fraction.is_empty() && fraction.bytes().all(|b| b.is_ascii_digit()) => whole,
        Some(_) => return false,
        None => clock,
    };
    let hms = |text: &str, max_first: u32, max_second: u32, parts: usize| {
        let fields: Vec<&str> = text.split(':').collect();
        fields.len() == parts
            && fields.iter().all(|f| f.len() == 2)
            && fields.iter().enumerate().all(|(i, f)| digits(f).is_some_and(|n| n <= [max_first, 59, max_second][i]))
    };
    hms(clock, 23, 60, 3) && offset.is_none_or(|o| hms(o, 23, 59, 2))
}

#[cfg(test)]
#[path = "content_tests.rs"]
mod tests;
