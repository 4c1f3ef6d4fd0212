//! How the admin tables show people, times and stored text to an operator: a user by name (the
//! id stays in `--json`), a time as ISO 8601 UTC, and text that came from outside (an issuer's
//! display name, a provider's account label, a client's name) with control and bidi characters
//! escaped, so it cannot move the cursor, recolour the terminal or reorder a line.

pub use crate::clock::iso_time;
use std::collections::HashMap;

use crate::store::Store;
use crate::store::users::User;

/// The names of the users a command prints, by id: read for the ids it shows (never every
/// user, which at a million users took seconds before the first line).
#[derive(Default)]
pub struct UserNames(HashMap<String, String>);

/// How many ids one lookup binds.
const NAMES_PER_QUERY: usize = 500;

impl UserNames {
    /// The names of these users.
    pub async fn of_ids<'a>(store: &Store, ids: impl IntoIterator<Item = &'a str>) -> anyhow::Result<Self> {
        let mut names = Self::default();
        names.add(store, ids).await?;
        Ok(names)
    }

    /// Reads the names of those of these users not read yet.
    pub async fn add<'a>(&mut self, store: &Store, ids: impl IntoIterator<Item = &'a str>) -> anyhow::Result<()> {
        let mut wanted: Vec<&str> = ids.into_iter().filter(|id| !self.0.contains_key(*id)).collect();
        wanted.sort_unstable();
        wanted.dedup();
        for chunk in wanted.chunks(NAMES_PER_QUERY) {
            self.0.extend(store.users().by_ids(chunk).await?.iter().map(|u| (u.id.clone(), user_name(u))));
        }
        Ok(())
    }

    /// The user's name, or the id itself for a user that no longer exists.
    pub fn of<'a>(&'a self, user_id: &'a str) -> &'a str {
        self.0.get(user_id).map_or(user_id, String::as_str)
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
    let mut stream = StreamTable::new(header);
    stream.batch(rows)
}

/// A table printed a batch at a time, so a long list starts printing at once: the header and
/// the column widths come with the first batch (a later cell wider than its column pushes the
/// rest of its line right).
pub struct StreamTable {
    header: Vec<String>,
    widths: Option<Vec<usize>>,
}

impl StreamTable {
    pub fn new(header: &[&str]) -> Self {
        StreamTable { header: header.iter().map(|h| (*h).to_owned()).collect(), widths: None }
    }

    /// The next rows as text (the header before the first batch's, even when it is empty).
    pub fn batch(&mut self, rows: &[Vec<String>]) -> String {
        let mut out = String::new();
        if self.widths.is_none() {
            let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
            for row in rows {
                for (width, cell) in widths.iter_mut().zip(row) {
                    *width = (*width).max(cell.chars().count());
                }
            }
            out.push_str(&line(&self.header, &widths));
            self.widths = Some(widths);
        }
        let widths = self.widths.as_deref().unwrap_or_default();
        for row in rows {
            out.push_str(&line(row, widths));
        }
        out
    }
}

fn line(row: &[String], widths: &[usize]) -> String {
    let last = row.len().saturating_sub(1);
    let mut line = String::new();
    for (i, cell) in row.iter().enumerate() {
        line.push_str(cell);
        if i < last {
            let pad = widths.get(i).copied().unwrap_or(0).saturating_sub(cell.chars().count());
            line.extend(std::iter::repeat_n(' ', pad + 2));
        }
    }
    let mut line = line.trim_end().to_owned();
    line.push('\n');
    line
}

/// A JSON array printed an element at a time: `[`, one compact object per line, `]`.
#[derive(Default)]
pub struct StreamJson {
    started: bool,
}

impl StreamJson {
    /// The next elements as text.
    pub fn batch(&mut self, values: &[serde_json::Value]) -> String {
        let mut out = String::new();
        for value in values {
            out.push_str(if self.started { ",\n" } else { "[\n" });
            self.started = true;
            out.push_str(&value.to_string());
        }
        out
    }

    /// The closing bracket (or `[]` for an empty array).
    pub fn end(self) -> String {
        if self.started { "\n]\n".into() } else { "[]\n".into() }
    }
}

/// Rows a streamed list reads per batch.
pub const BATCH: usize = 500;

/// Writes `text` to stdout now. A reader that stopped reading (`| head`) ends the command
/// quietly with success, as other tools do, rather than with a panic.
pub fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => Err(e.into()),
    }
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
    fn a_streamed_table_keeps_the_first_batchs_widths_and_json_stays_one_array() {
        let mut stream = StreamTable::new(&["USER", "ID"]);
        assert_eq!(stream.batch(&[vec!["alice".into(), "1".into()]]), "USER   ID\nalice  1\n");
        assert_eq!(stream.batch(&[vec!["bo".into(), "2".into()]]), "bo     2\n");
        assert_eq!(StreamTable::new(&["USER", "ID"]).batch(&[]), "USER  ID\n");
        let mut json = StreamJson::default();
        let text =
            json.batch(&[serde_json::json!({"a": 1})]) + &json.batch(&[serde_json::json!({"a": 2})]) + &json.end();
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), serde_json::json!([{"a": 1}, {"a": 2}]));
        assert_eq!(StreamJson::default().end(), "[]\n");
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
