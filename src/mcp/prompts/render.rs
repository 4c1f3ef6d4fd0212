//! `{{argument}}` placeholders in operator prompt text.
//!
//! A template is parsed once, at load, into literal and placeholder segments; rendering walks
//! the segments and appends each argument value as it is. Values are therefore data: a value
//! that itself contains `{{other}}` is never looked at again (MCP 2025-11-25 server/prompts
//! §Security: "validated against injection").
//!
//! Syntax: `{{` optional spaces, a name of `[A-Za-z0-9_.-]`, optional spaces, `}}`. Anything
//! else (`{{ not a name }}`, a lone `{{`) is literal text.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Placeholder(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    segments: Vec<Segment>,
}

impl Template {
    pub fn parse(text: &str) -> Self {
        let mut segments = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            let (before, from_braces) = rest.split_at(start);
            literal.push_str(before);
            match placeholder_at(from_braces) {
                Some((name, consumed)) => {
                    if !literal.is_empty() {
                        segments.push(Segment::Literal(std::mem::take(&mut literal)));
                    }
                    segments.push(Segment::Placeholder(name.to_owned()));
                    rest = &from_braces[consumed..];
                }
                None => {
                    // Not a placeholder: keep one brace and look again from the next one, so
                    // `{{{x}}` is a `{` followed by the placeholder `x`.
                    literal.push('{');
                    rest = &from_braces[1..];
                }
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            segments.push(Segment::Literal(literal));
        }
        Self { segments }
    }

    /// The argument names the template refers to, in order of appearance (with repeats).
    pub fn placeholders(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().filter_map(|s| match s {
            Segment::Placeholder(name) => Some(name.as_str()),
            Segment::Literal(_) => None,
        })
    }

    /// One pass: literals as written, each placeholder replaced by its value (an optional
    /// argument that was not given renders as nothing).
    pub fn render(&self, values: &BTreeMap<String, String>) -> String {
        let mut out = String::new();
        for segment in &self.segments {
            match segment {
                Segment::Literal(text) => out.push_str(text),
                Segment::Placeholder(name) => out.push_str(values.get(name).map(String::as_str).unwrap_or_default()),
            }
        }
        out
    }
}

/// `text` starts with `{{`: the placeholder's name and how many bytes it spans, if it is one.
fn placeholder_at(text: &str) -> Option<(&str, usize)> {
    let inner = text.strip_prefix("{{")?;
    let end = inner.find("}}")?;
    let name = inner[..end].trim_matches(' ');
    is_valid_name(name).then_some((name, 2 + end + 2))
}

/// MCP names (SEP-986): 1–128 characters of `[A-Za-z0-9_.-]`.
pub fn is_valid_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn placeholders_are_replaced_by_their_values() {
        let t = Template::parse("Hello {{name}}, about {{ topic }}!");
        assert_eq!(t.placeholders().collect::<Vec<_>>(), ["name", "topic"]);
        assert_eq!(t.render(&values(&[("name", "Ann"), ("topic", "notes")])), "Hello Ann, about notes!");
    }

    #[test]
    fn a_value_that_looks_like_a_placeholder_stays_literal() {
        let t = Template::parse("{{a}} and {{b}}");
        let out = t.render(&values(&[("a", "{{b}}"), ("b", "B")]));
        assert_eq!(out, "{{b}} and B");
    }

    #[test]
    fn text_that_is_not_a_placeholder_is_kept_as_written() {
        for text in ["{{", "}}", "{{ two words }}", "{{}}", "a {{b", "{ {x} }", "{{x}"] {
            let t = Template::parse(text);
            assert_eq!(t.placeholders().count(), 0, "{text:?}");
            assert_eq!(t.render(&BTreeMap::new()), text);
        }
    }

    #[test]
    fn extra_braces_around_a_placeholder_are_literal() {
        let t = Template::parse("{{{x}}}");
        assert_eq!(t.render(&values(&[("x", "1")])), "{1}");
    }

    #[test]
    fn a_missing_optional_value_renders_as_nothing() {
        assert_eq!(Template::parse("[{{opt}}]").render(&BTreeMap::new()), "[]");
    }

    #[test]
    fn multibyte_text_around_placeholders_survives() {
        let t = Template::parse("é{{x}}ü {{ y}}→");
        assert_eq!(t.render(&values(&[("x", "ß"), ("y", "ø")])), "éßü ø→");
    }
}
