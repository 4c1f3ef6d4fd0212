//! Audit rows written in batches (the token API's answers, `crate::store::token_api`'s queue):
//! nothing per row beyond the row itself. A batch is one transaction: its rows in multi-row
//! `INSERT`s; its token-API answers' searchable text shared, one `audit_texts` row per distinct
//! text (an answer differs from the next only in service, provider, answer and outcome),
//! instead of a trigram index entry per row; and its token-API answers counted for the
//! dashboard per (hour, service, outcome) group, one upsert each, instead of one per row
//! (migration 0032: those per-row triggers cut the writer to a sixth of its speed).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::clock::Timestamp;
use crate::store::audit::log::Audit;
use crate::store::audit::log::{AuditEvent, Outcome, counted};
use crate::store::machinery::cache_effect::CacheEffect;
use crate::store::machinery::error::StoreResult;

/// An [`AuditEvent`] that owns its text, for a batch.
#[derive(Debug)]
pub(in crate::store) struct QueuedEvent {
    at: Timestamp,
    actor: String,
    action: String,
    outcome: Outcome,
    user_id: Option<String>,
    provider: Option<String>,
    detail: Option<String>,
}

impl QueuedEvent {
    /// Counts it in the metrics, as every entry is once written.
    pub(in crate::store) fn count(&self) {
        counted(&self.action, self.outcome);
    }

    pub(in crate::store) fn of(at: Timestamp, event: &AuditEvent<'_>) -> Self {
        QueuedEvent {
            at,
            actor: event.actor.as_text(),
            action: event.action.to_owned(),
            outcome: event.outcome,
            user_id: event.user_id.map(str::to_owned),
            provider: event.provider.map(str::to_owned),
            detail: event.detail.map(str::to_owned),
        }
    }
}

impl Audit<'_> {
    /// Writes one batch in one transaction: the shared texts it needs, its rows in multi-row
    /// statements, and its token-API answers' hourly counts. Returns the texts it resolved, for
    /// the writer to remember once they are committed.
    pub(in crate::store) async fn write_batch(self, batch: &[QueuedEvent], known: &TextIds) -> StoreResult<TextIds> {
        let _turn = self.store.hot_write_turn().await;
        let mut tx = self.store.begin(CacheEffect::Nothing).await?;
        // Sorted, so two instances' writers take the rows they share in the same order.
        let wanted: BTreeSet<TextKey<'_>> = batch.iter().filter_map(QueuedEvent::shared_text).collect();
        let mut resolved = TextIds::new();
        for key in wanted {
            if known.contains_key(&key.owned()) {
                continue;
            }
            let (id,): (String,) = sqlx::query_as(
                "INSERT INTO audit_texts (id, text) VALUES ($1, LOWER($2 || ' ' || COALESCE($3, '') || ' ' || \
                 COALESCE($4, '') || ' ' || COALESCE($5, '') || ' ' || COALESCE($6, ''))) \
                 ON CONFLICT (text) DO UPDATE SET text = excluded.text RETURNING id",
            )
            .bind(uuid::Uuid::new_v4().simple().to_string())
            .bind(key.action)
            .bind(key.actor)
            .bind(key.outcome)
            .bind(key.provider)
            .bind(key.detail)
            .fetch_one(&mut *tx)
            .await?;
            resolved.insert(key.owned(), id);
        }
        // Each distinct text's id, looked up once per batch, not once per row.
        let ids: HashMap<TextKey<'_>, &str> = batch
            .iter()
            .filter_map(QueuedEvent::shared_text)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter_map(|key| {
                let owned = key.owned();
                let id = resolved.get(&owned).or_else(|| known.get(&owned))?;
                Some((key, id.as_str()))
            })
            .collect();
        let mut rest = batch;
        while !rest.is_empty() {
            let size = statement_rows(rest.len());
            let (rows, after) = rest.split_at(size);
            rest = after;
            let mut query = sqlx::query(insert_statement(size));
            for event in rows {
                let text_id = event.shared_text().and_then(|key| ids.get(&key).copied());
                query = query
                    .bind(event.at)
                    .bind(event.user_id.as_deref())
                    .bind(event.action.as_str())
                    .bind(event.provider.as_deref())
                    .bind(event.detail.as_deref())
                    .bind(event.actor.as_str())
                    .bind(event.outcome.as_str())
                    .bind(text_id);
            }
            query.execute(&mut *tx).await?;
        }
        for ((hour, service, outcome), n) in token_api_counts(batch) {
            sqlx::query(
                "INSERT INTO console_counts (hour, series, label, sub, n) VALUES ($1, 'token_api', $2, $3, $4) \
                 ON CONFLICT (hour, series, label, sub) DO UPDATE SET n = console_counts.n + excluded.n",
            )
            .bind(hour)
            .bind(service)
            .bind(outcome)
            .bind(n)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(resolved)
    }
}

/// The most rows one `INSERT` statement carries (8 values each). Kept small because SQLite
/// finds each of a statement's parameters by walking its list of parameter names, on every
/// execution (`sqlite3_bind_parameter_name`, which sqlx calls per value) and when preparing: a
/// statement's cost grows with the square of its values, so 256 rows per statement spent more
/// on finding parameters than on inserting.
const ROWS_PER_STATEMENT: usize = 16;

/// Rows in the next statement for `left` rows still to write: [`ROWS_PER_STATEMENT`], then
/// powers of two, so a batch of any size uses at most six statement texts, each prepared once
/// and then taken from the connection's statement cache.
fn statement_rows(left: usize) -> usize {
    if left >= ROWS_PER_STATEMENT { ROWS_PER_STATEMENT } else { 1 << left.ilog2() }
}

/// The `INSERT` of `rows` rows (a power of two up to [`ROWS_PER_STATEMENT`]), built once.
fn insert_statement(rows: usize) -> &'static str {
    static STATEMENTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let statements = STATEMENTS.get_or_init(|| {
        (0..=ROWS_PER_STATEMENT.ilog2())
            .map(|power| {
                let values: Vec<String> = (0..1usize << power)
                    .map(|row| {
                        let placeholders: Vec<String> =
                            (1..=8).map(|column| format!("${}", row * 8 + column)).collect();
                        format!("({})", placeholders.join(", "))
                    })
                    .collect();
                format!(
                    "INSERT INTO audit_log (at, user_id, action, provider, detail, actor, outcome, text_id) VALUES {}",
                    values.join(", ")
                )
            })
            .collect()
    });
    &statements[rows.ilog2() as usize]
}

/// What makes an audit row's searchable text (migration 0032: such rows share one
/// `audit_texts` row per distinct text instead of each being indexed).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct TextKey<'a> {
    action: &'a str,
    actor: &'a str,
    outcome: &'a str,
    provider: Option<&'a str>,
    detail: Option<&'a str>,
}

type OwnedTextKey = (String, String, String, Option<String>, Option<String>);
pub(in crate::store) type TextIds = HashMap<OwnedTextKey, String>;

impl TextKey<'_> {
    fn owned(&self) -> OwnedTextKey {
        (
            self.action.to_owned(),
            self.actor.to_owned(),
            self.outcome.to_owned(),
            self.provider.map(str::to_owned),
            self.detail.map(str::to_owned),
        )
    }
}

impl QueuedEvent {
    /// The text this row shares with others like it, for a token-API answer: its text names
    /// only the service, provider, answer and outcome (the user is a column, not text), so a
    /// deployment has a few such texts per service. Other queued rows (a forwarded gateway
    /// call names its user and its latency) are indexed one by one, as rows written directly.
    fn shared_text(&self) -> Option<TextKey<'_>> {
        self.action.starts_with("token_api.").then(|| TextKey {
            action: &self.action,
            actor: &self.actor,
            outcome: self.outcome.as_str(),
            provider: self.provider.as_deref(),
            detail: self.detail.as_deref(),
        })
    }
}

/// The batch's token-API answers per (hour, service, outcome): what the per-row trigger
/// `console_counts_token_api` counts for rows written one by one (migrations 0028, 0032).
fn token_api_counts(batch: &[QueuedEvent]) -> BTreeMap<(i64, &str, &str), i64> {
    let mut counts = BTreeMap::new();
    for event in batch {
        if let (true, Some(service)) = (event.action.starts_with("token_api."), event.actor.strip_prefix("service:")) {
            *counts.entry((event.at - event.at.rem_euclid(3600), service, event.outcome.as_str())).or_insert(0) += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::token_api::audit_queue::BATCH;

    #[test]
    fn a_batch_of_any_size_is_written_in_statements_of_a_few_shapes_covering_every_row() {
        for len in 0..=(BATCH + 3) {
            let (mut left, mut shapes) = (len, BTreeSet::new());
            while left > 0 {
                let rows = statement_rows(left);
                assert!(rows >= 1 && rows <= left && rows.is_power_of_two(), "{len}: {rows} of {left}");
                let sql = insert_statement(rows);
                assert_eq!(sql.matches('(').count() - 1, rows, "{len}: one value list per row");
                assert!(sql.ends_with(&format!("${})", rows * 8)), "{len}: numbered to the last value");
                shapes.insert(rows);
                left -= rows;
            }
            assert!(shapes.len() <= 6, "{len}: {shapes:?}");
        }
    }
}
