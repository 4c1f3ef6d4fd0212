//! Rust sources read as text, for the tests of the code's shape: every file under a folder, the
//! code with comments and literals blanked out ([`lex`]), and every path it names ([`paths`]).

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, each folder's in order.
pub fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
}

/// The code with comments, strings and character literals blanked out.
pub fn lex(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if (c == 'r' || (c == 'b' && next == Some('r'))) && (i == 0 || !ident(chars[i - 1])) && {
            let start = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = chars[start..].iter().take_while(|&&h| h == '#').count();
            chars.get(start + hashes) == Some(&'"')
        } {
            let start = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = chars[start..].iter().take_while(|&&h| h == '#').count();
            i = start + hashes + 1;
            loop {
                if i >= chars.len() {
                    break;
                }
                if chars[i] == '"' && chars[i + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Every path: `use` trees expanded, then the paths written inline.
pub fn paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    let mut outside_use = String::new();
    while let Some(at) = find_word(rest, "use") {
        outside_use.push_str(&rest[..at]);
        let tree_start = at + 3;
        let Some(end) = rest[tree_start..].find(';') else { break };
        // Spaces go, but `a as b` keeps its own.
        let joined = rest[tree_start..tree_start + end].split_whitespace().collect::<Vec<_>>().join(" ");
        let tree = joined.replace(" as ", "\u{1}").replace(' ', "").replace('\u{1}', " as ");
        for path in expand(&tree) {
            let path = path.split(" as ").next().unwrap_or(&path).to_owned();
            let path = path.trim_start_matches("::");
            if !path.is_empty() && path != "self" {
                found.push(path.trim_end_matches("::self").trim_end_matches("::*").to_owned());
            }
        }
        rest = &rest[tree_start + end + 1..];
    }
    outside_use.push_str(rest);
    // Inline paths: every `a::b…` that does not continue a longer path or follow a `.` (a
    // method's turbofish). Those that start at `crate`, `super`, `self` or a child module count.
    let bytes = outside_use.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut from = 0;
    while let Some(at) = outside_use[from..].find("::") {
        let colons = from + at;
        from = colons + 2;
        let mut start = colons;
        while start > 0 && ident(bytes[start - 1]) {
            start -= 1;
        }
        if start == colons || (start > 0 && matches!(bytes[start - 1], b':' | b'.')) {
            continue;
        }
        let mut end = start;
        while end < bytes.len() && (ident(bytes[end]) || bytes[end] == b':') {
            end += 1;
        }
        found.push(outside_use[start..end].trim_end_matches(':').to_owned());
        from = from.max(end);
    }
    found
}

/// Where `word` stands alone (not inside an identifier).
fn find_word(text: &str, word: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(at) = text[from..].find(word) {
        let start = from + at;
        let end = start + word.len();
        let before = start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let after = end < bytes.len() && bytes[end].is_ascii_whitespace();
        if before && after {
            return Some(start);
        }
        from = end;
    }
    None
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else { return vec![tree.to_owned()] };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut current) = (0, String::new());
    for ch in inner.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(ch);
    }
    parts.push(current);
    parts.into_iter().filter(|p| !p.is_empty()).flat_map(|p| expand(&format!("{prefix}{p}"))).collect()
}
