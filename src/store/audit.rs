//! An append-only record of what happened to grants, authorizations and sign-ins. Never holds a
//! secret. Text a visitor chose (a username typed at sign-in) goes in only through [`quoted`].

use super::{Store, StoreResult};
use crate::clock::Timestamp;

#[derive(Debug, Clone, sqlx::FromRow, serde::Serialize)]
pub struct AuditEntry {
    pub id: i64,
    pub at: i64,
    pub user_id: Option<String>,
    pub action: String,
    pub provider: Option<String>,
    pub detail: Option<String>,
}

impl Store {
    pub async fn audit(
        &self,
        at: Timestamp,
        user_id: Option<&str>,
        action: &str,
        provider: Option<&str>,
        detail: Option<&str>,
    ) -> StoreResult<()> {
        sqlx::query("INSERT INTO audit_log (at, user_id, action, provider, detail) VALUES ($1, $2, $3, $4, $5)")
            .bind(at)
            .bind(user_id)
            .bind(action)
            .bind(provider)
            .bind(detail)
            .execute(self.db())
            .await?;
        Ok(())
    }

    pub async fn audit_entries(&self, user_id: Option<&str>, limit: i64) -> StoreResult<Vec<AuditEntry>> {
        Ok(sqlx::query_as::<_, AuditEntry>(
            "SELECT id, at, user_id, action, provider, detail FROM audit_log WHERE ($1 IS NULL OR user_id = $1) ORDER BY id DESC LIMIT $2",
        )
        .bind(user_id)
        .bind(limit)
        .fetch_all(self.db())
        .await?)
    }
}

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
