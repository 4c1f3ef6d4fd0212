//! How the admin tables show people, times and stored text to an operator: a user by name (the
//! id stays in `--json`), a time as ISO 8601 UTC, and text that came from outside (an issuer's
//! display name, a provider's account label, a client's name) with control and bidi characters
//! escaped, so it cannot move the cursor, recolour the terminal or reorder a line.

pub use crate::clock::iso_time;
use std::collections::HashMap;

use crate::store::Store;
use crate::store::users::User;

/// Every user's name by id, read once per command.
pub struct UserNames(HashMap<String, String>);

impl UserNames {
    pub async fn load(store: &Store) -> anyhow::Result<Self> {
        Ok(Self(store.list_users().await?.iter().map(|u| (u.id.clone(), user_name(u))).collect()))
    }

    /// The user's name, or the id itself for a user that no longer exists.
    pub fn of<'a>(&'a self, user_id: &'a str) -> &'a str {
        self.0.get(user_id).map_or(user_id, String::as_str)
    }

    /// Whether the user was known when the names were read.
    pub fn knows(&self, user_id: &str) -> bool {
        self.0.contains_key(user_id)
    }

    /// [`UserNames::of`] for an optional id (`-` for none).
    pub fn of_opt<'a>(&'a self, user_id: Option<&'a str>) -> &'a str {
        user_id.map_or("-", |id| self.of(id))
    }
}

/// A local account's username; an external user's display name from the issuer, else its
/// subject (external users have no username).
pub fn user_name(user: &User) -> String {
    printable(user.username.as_deref().or(user.display_name.as_deref()).unwrap_or(&user.subject))
}

/// `text` with control and bidirectional-formatting characters as `\u{…}` escapes.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || is_bidi_control(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// The Unicode bidi formatting characters (UAX #9 §2): marks, embeddings, overrides, isolates.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Rows under a header, each column as wide as its widest cell (the last one unpadded).
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows) {
        let last = row.len().saturating_sub(1);
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i < last {
                let pad = widths.get(i).copied().unwrap_or(0).saturating_sub(cell.chars().count());
                line.extend(std::iter::repeat_n(' ', pad + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_has_a_header_and_aligned_columns() {
        let rows = vec![
            vec!["alice".to_owned(), "demo".to_owned(), "x".to_owned()],
            vec!["bo".to_owned(), "github".to_owned(), "".to_owned()],
        ];
        assert_eq!(
            table(&["USER", "PROVIDER", "NOTE"], &rows),
            "USER   PROVIDER  NOTE\nalice  demo      x\nbo     github\n"
        );
    }

    #[test]
    fn terminal_controls_and_bidi_overrides_are_escaped() {
        assert_eq!(printable("alice"), "alice");
        assert_eq!(printable("Zoë Ådams"), "Zoë Ådams");
        assert_eq!(printable("evil\u{1b}[2Jname"), "evil\\u{1b}[2Jname");
        assert_eq!(printable("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(printable("a\nb\u{9b}c"), "a\\u{a}b\\u{9b}c");
    }

    #[test]
    fn a_user_is_named_by_username_then_display_name_then_subject() {
        let user = |username: Option<&str>, display_name: Option<&str>| User {
            id: "id-1".into(),
            issuer: "https://idp.example".into(),
            subject: "sub-1".into(),
            username: username.map(Into::into),
            password_hash: None,
            created_at: 0,
            display_name: display_name.map(Into::into),
            admin: 0,
            disabled_at: None,
        };
        assert_eq!(user_name(&user(Some("alice"), None)), "alice");
        assert_eq!(user_name(&user(None, Some("Alice A."))), "Alice A.");
        assert_eq!(user_name(&user(None, None)), "sub-1");
    }
}
