//! The plain pieces of a form, shared by the schema it becomes ([`super::schema`]) and the check
//! of an answer ([`super::content`]): a field and its kind, the value an answer gives it, and
//! [`check_value`], which both the schema (a field's default) and the answer check use.

use serde_json::Value;

/// `format` of a string field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    Email,
    Uri,
    Date,
    DateTime,
}

impl TextFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            TextFormat::Email => "email",
            TextFormat::Uri => "uri",
            TextFormat::Date => "date",
            TextFormat::DateTime => "date-time",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        [TextFormat::Email, TextFormat::Uri, TextFormat::Date, TextFormat::DateTime]
            .into_iter()
            .find(|f| f.as_str() == value)
    }
}

/// One option of a select; with a title the select goes on the wire titled (`oneOf`/`anyOf`).
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub value: String,
    pub title: Option<String>,
}

impl Choice {
    pub fn new(value: impl Into<String>) -> Self {
        Self { value: value.into(), title: None }
    }

    pub fn titled(value: impl Into<String>, title: impl Into<String>) -> Self {
        Self { value: value.into(), title: Some(title.into()) }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    Text {
        min_length: Option<u32>,
        max_length: Option<u32>,
        format: Option<TextFormat>,
    },
    Number {
        integer: bool,
        minimum: Option<f64>,
        maximum: Option<f64>,
    },
    Boolean,
    /// Single-select.
    OneOf {
        options: Vec<Choice>,
    },
    /// Multi-select: an array of distinct option values.
    ManyOf {
        options: Vec<Choice>,
        min_items: Option<u64>,
        max_items: Option<u64>,
    },
}

/// One field of a form. Build with a constructor, then the modifiers that apply to its kind;
/// a modifier that does not apply (a length on a boolean) is an error at [`super::FormSchema::new`].
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub(crate) name: String,
    pub(crate) title: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) required: bool,
    pub(crate) kind: Kind,
    pub(crate) default: Option<Value>,
    pub(crate) misuse: Option<&'static str>,
}

impl Field {
    fn with_kind(name: impl Into<String>, kind: Kind) -> Self {
        Self { name: name.into(), title: None, description: None, required: false, kind, default: None, misuse: None }
    }

    pub fn text(name: impl Into<String>) -> Self {
        Self::with_kind(name, Kind::Text { min_length: None, max_length: None, format: None })
    }

    pub fn number(name: impl Into<String>) -> Self {
        Self::with_kind(name, Kind::Number { integer: false, minimum: None, maximum: None })
    }

    pub fn integer(name: impl Into<String>) -> Self {
        Self::with_kind(name, Kind::Number { integer: true, minimum: None, maximum: None })
    }

    pub fn boolean(name: impl Into<String>) -> Self {
        Self::with_kind(name, Kind::Boolean)
    }

    /// A single-select over `options`.
    pub fn one_of(name: impl Into<String>, options: impl IntoIterator<Item = Choice>) -> Self {
        Self::with_kind(name, Kind::OneOf { options: options.into_iter().collect() })
    }

    /// A multi-select over `options`.
    pub fn many_of(name: impl Into<String>, options: impl IntoIterator<Item = Choice>) -> Self {
        Self::with_kind(name, Kind::ManyOf { options: options.into_iter().collect(), min_items: None, max_items: None })
    }

    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// The value the client pre-fills (SEP-1034); checked against the field at construction.
    pub fn default(mut self, value: impl Into<Value>) -> Self {
        self.default = Some(value.into());
        self
    }

    pub fn length(mut self, min: Option<u32>, max: Option<u32>) -> Self {
        match &mut self.kind {
            Kind::Text { min_length, max_length, .. } => (*min_length, *max_length) = (min, max),
            _ => self.misuse = Some("length bounds apply to text fields only"),
        }
        self
    }

    pub fn format(mut self, value: TextFormat) -> Self {
        match &mut self.kind {
            Kind::Text { format, .. } => *format = Some(value),
            _ => self.misuse = Some("a format applies to text fields only"),
        }
        self
    }

    pub fn range(mut self, min: Option<f64>, max: Option<f64>) -> Self {
        match &mut self.kind {
            Kind::Number { minimum, maximum, .. } => (*minimum, *maximum) = (min, max),
            _ => self.misuse = Some("a range applies to number fields only"),
        }
        self
    }

    pub fn items(mut self, min: Option<u64>, max: Option<u64>) -> Self {
        match &mut self.kind {
            Kind::ManyOf { min_items, max_items, .. } => (*min_items, *max_items) = (min, max),
            _ => self.misuse = Some("item bounds apply to multi-selects only"),
        }
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

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
pub(super) fn shown(value: &str) -> String {
    let mut out: String = value.chars().take(40).collect();
    if value.chars().count() > 40 {
        out.push('…');
    }
    out
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
