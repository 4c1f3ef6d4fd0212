//! How names that others chose reach a person: client names (self-registered, self-reported,
//! or an operator's label), account labels from providers, user names from an identity provider.
//!
//! Askama escapes HTML, but not characters that change how text *looks*: a client registered
//! as `"Evil\u{202E}gpj.exe"` renders as "Evilexe.jpg" — bidirectional overrides reorder what
//! follows them, and control characters can hide or break text. [`safe_text`] is the one way
//! such a name becomes display text: every such character is shown as a visible `[U+XXXX]`, so a
//! spoofing attempt is seen for what it is instead of silently disappearing.

use std::fmt;

/// `raw` with control and bidirectional-formatting characters replaced by a visible `[U+XXXX]`
/// (tabs and line breaks become one space), trimmed.
pub fn safe_text(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            '\t' | '\n' | '\r' => out.push(' '),
            c if is_hidden_or_reordering(c) => out.push_str(&format!("[U+{:04X}]", u32::from(c))),
            c => out.push(c),
        }
    }
    out.trim().to_owned()
}

/// C0 and C1 controls and DEL; the bidi embeddings, overrides and isolates (Unicode TR9: LRE,
/// RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI) and marks (LRM, RLM, ALM); line and paragraph
/// separators; and the invisible zero-width space and byte-order mark.
fn is_hidden_or_reordering(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200B}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

/// How every page names a client: what it is called, and what kind of name that is (who chose
/// it), e.g. **Flow Tool** (name chosen by the app itself; client id …). Built by
/// [`crate::identity::ClientIdentity::name`] and [`crate::broker::consent::client_name`] only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientName {
    /// Display text (already through [`safe_text`]).
    pub name: String,
    /// Who chose the name or what the client is, in a few plain words.
    pub kind: String,
}

impl ClientName {
    /// `name` is passed through [`safe_text`]; `kind` is ours.
    pub fn new(name: &str, kind: impl Into<String>) -> Self {
        Self { name: safe_text(name), kind: kind.into() }
    }
}

/// `name (kind)`: where a page or a stored row needs one string.
impl fmt::Display for ClientName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_overrides_and_isolates_are_shown_not_obeyed() {
        assert_eq!(safe_text("Evil\u{202E}gpj.exe"), "Evil[U+202E]gpj.exe");
        for c in ['\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}'] {
            assert_eq!(safe_text(&format!("a{c}b")), format!("a[U+{:04X}]b", u32::from(c)));
        }
        assert_eq!(safe_text("a\u{200E}b\u{200F}c"), "a[U+200E]b[U+200F]c");
    }

    #[test]
    fn controls_are_shown_and_line_breaks_become_spaces() {
        assert_eq!(
            safe_text("a\u{0}b\u{1b}[31mc\u{7f}d\u{85}e\u{9b}f"),
            "a[U+0000]b[U+001B][31mc[U+007F]d[U+0085]e[U+009B]f"
        );
        assert_eq!(safe_text(" two\nlines\tand tab\r\n"), "two lines and tab");
    }

    #[test]
    fn ordinary_names_in_any_script_pass_unchanged() {
        for name in ["Flow Tool", "Zoë’s app", "שלום", "مرحبا", "日本語のアプリ", "👩‍💻 dev"]
        {
            assert_eq!(safe_text(name), name);
        }
    }

    #[test]
    fn a_client_name_is_safe_text_with_its_kind() {
        let name = ClientName::new("x\u{202E}y", "kind");
        assert_eq!(name.to_string(), "x[U+202E]y (kind)");
    }
}
