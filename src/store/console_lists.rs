//! The admin lists' filters and sort orders (issue 29): each one an equality on an indexed
//! column, paged by keyset in the index's order, so a filtered page deep in a million rows
//! costs what the first page does. Separate from the text search (`store::paging`): a list is
//! either searched or filtered.
//!
//! - audit log: by outcome (`audit_log_outcome (outcome, id)`), newest or oldest first (`id`);
//! - authorizations: by stored status (`authorizations_status_created (status, created_at, id)`,
//!   migration 0028), newest first.

use super::audit::{AUDIT_COLUMNS, AuditEntry, Outcome};
use super::authorizations::{AUTHZ_COLUMNS, AuthorizationRow, RawAuthorizationRow};
use super::paging::{Cursor, Paged, Window};
use super::{FetchIn, Store, StoreResult};

/// The authorization statuses a filter may name (as stored).
pub const AUTHORIZATION_STATUSES: &[&str] =
    &["pending", "redirected", "exchanging", "completed", "declined", "failed", "expired"];

/// The rows past `limit` say there is a next page; it starts after the last row shown.
fn paged<T>(mut rows: Vec<T>, window: &Window, key: impl Fn(&T) -> Cursor) -> Paged<T> {
    let shown = usize::try_from(window.limit).unwrap_or(usize::MAX);
    let next = if rows.len() > shown {
        rows.truncate(shown);
        rows.last().map(key)
    } else {
        None
    };
    Paged { rows, next }
}

impl Store {
    /// Audit entries with this outcome (any when `None`), newest first or oldest first.
    pub async fn page_audit_filtered(
        &self,
        outcome: Option<Outcome>,
        oldest_first: bool,
        window: Window,
    ) -> StoreResult<Paged<AuditEntry>> {
        let (after, order) = if oldest_first { ("id > ", "ASC") } else { ("id < ", "DESC") };
        let mut conditions = Vec::new();
        let mut n = 0;
        let mut next = || {
            n += 1;
            format!("${n}")
        };
        if outcome.is_some() {
            conditions.push(format!("outcome = {}", next()));
        }
        if window.after.is_some() {
            conditions.push(format!("{after}{}", next()));
        }
        let filter = if conditions.is_empty() { String::new() } else { format!(" WHERE {}", conditions.join(" AND ")) };
        let sql = format!("SELECT {AUDIT_COLUMNS} FROM audit_log{filter} ORDER BY id {order} LIMIT {}", next());
        let mut query = sqlx::query_as::<_, AuditEntry>(&sql);
        if let Some(outcome) = outcome {
            query = query.bind(outcome.as_str());
        }
        if let Some(cursor) = &window.after {
            query = query.bind(cursor.key);
        }
        let rows = query.bind(window.limit.saturating_add(1)).fetch_all_in(self.read()).await?;
        Ok(paged(rows, &window, |e| Cursor::new(e.id, "")))
    }

    /// Authorizations with this stored status, newest first. An open attempt past its expiry
    /// keeps its stored status (`pending`, …) until the sweep or an admin expires it.
    pub async fn page_authorizations_with_status(
        &self,
        status: &str,
        window: Window,
    ) -> StoreResult<Paged<AuthorizationRow>> {
        let rows = match &window.after {
            None => {
                let sql = format!(
                    "SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE status = $1 ORDER BY created_at DESC, id DESC LIMIT $2"
                );
                sqlx::query_as::<_, RawAuthorizationRow>(&sql)
                    .bind(status)
                    .bind(window.limit.saturating_add(1))
                    .fetch_all_in(self.read())
                    .await?
            }
            Some(cursor) => {
                let sql = format!(
                    "SELECT {AUTHZ_COLUMNS} FROM authorizations WHERE status = $1 AND (created_at, id) < ($2, $3) \
                     ORDER BY created_at DESC, id DESC LIMIT $4"
                );
                sqlx::query_as::<_, RawAuthorizationRow>(&sql)
                    .bind(status)
                    .bind(cursor.key)
                    .bind(cursor.id.clone())
                    .bind(window.limit.saturating_add(1))
                    .fetch_all_in(self.read())
                    .await?
            }
        };
        let rows = rows.into_iter().map(AuthorizationRow::try_from).collect::<StoreResult<Vec<_>>>()?;
        Ok(paged(rows, &window, |a| Cursor::new(a.created_at, a.id.clone())))
    }
}
