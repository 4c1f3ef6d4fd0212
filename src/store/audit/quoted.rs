//! Text a visitor chose (a username typed at sign-in), made safe to put in an audit entry's
//! detail: what an operator reads is exactly what was sent, and nothing can fake a field.

/// `value` cut to `max_chars` and quoted for a `key="value"` detail: quotes, backslashes,
/// control, format and bidi characters (U+202E would reorder what an operator reads) are
/// escaped as `\u{…}`, so a reader sees exactly what was sent and nothing can fake a field.
pub fn quoted(value: &str, max_chars: usize) -> String {
    let mut out = String::from("\"");
    for (i, c) in value.chars().enumerate() {
        if i == max_chars {
            out.push('…');
            break;
        }
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() || is_invisible(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Format characters that change how text reads without showing themselves: zero-width and
/// joiners, bidi embeddings, overrides and isolates, invisible operators, the BOM.
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{ad}' | '\u{61c}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

#[cfg(test)]
mod tests {
    use super::quoted;

    #[test]
    fn quoted_escapes_what_could_mislead_a_reader_and_bounds_the_length() {
        assert_eq!(quoted("alice", 64), "\"alice\"");
        assert_eq!(quoted("a\"b\\c", 64), "\"a\\\"b\\\\c\"");
        assert_eq!(quoted("evil\u{202e}nimda", 64), "\"evil\\u{202e}nimda\"");
        assert_eq!(quoted("a\nreason=ok", 64), "\"a\\u{a}reason=ok\"");
        assert_eq!(quoted(&"x".repeat(500), 8), format!("\"{}…\"", "x".repeat(8)));
        assert_eq!(quoted("żółw", 64), "\"żółw\"", "ordinary letters stay readable");
    }
}
