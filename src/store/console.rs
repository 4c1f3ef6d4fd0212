//! What the admin dashboard's charts read: hourly counts kept by triggers as the data changes
//! (migration 0028, `console_counts`), and the browser sessions alive now. Each read is bounded
//! by an index (the counts' primary key starts with the hour; sessions by expiry), so the
//! dashboard costs the same at a thousand rows or a million.

use super::paging::{COUNT_CAP, Count};
use super::{FetchIn, Store, StoreResult};
use crate::clock::Timestamp;

/// One hour's count of one series' value (`label`, and `sub` where the series splits further).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct HourCount {
    /// The hour's first Unix second.
    pub hour: i64,
    pub series: String,
    pub label: String,
    pub sub: String,
    pub n: i64,
}

impl Store {
    /// Every hourly count from the hour holding `since` on: a range of the primary key, a few
    /// rows per hour and series value.
    pub async fn console_counts(&self, since: Timestamp) -> StoreResult<Vec<HourCount>> {
        let query = sqlx::query_as::<_, HourCount>(
            "SELECT hour, series, label, sub, n FROM console_counts WHERE hour >= $1 ORDER BY hour, series, label, sub",
        )
        .bind(since - since.rem_euclid(3600));
        Ok(query.fetch_all_in(self.read()).await?)
    }

    /// Browser sessions that have not expired at `now`: exact up to [`COUNT_CAP`], then
    /// "more than" (reading at most that many index entries).
    pub async fn active_browser_sessions(&self, now: Timestamp) -> StoreResult<Count> {
        let (n,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM (SELECT 1 FROM browser_sessions WHERE expires_at > $1 LIMIT $2) capped",
        )
        .bind(now)
        .bind(COUNT_CAP + 1)
        .fetch_one_in(self.read())
        .await?;
        Ok(if n <= COUNT_CAP { Count::Exact(n) } else { Count::AtLeast(COUNT_CAP) })
    }
}

/// How a provider's refreshes went lately (migration 0028's `provider_health`, kept by triggers).
#[derive(Debug, Clone, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct ProviderHealth {
    pub provider: String,
    pub last_success_at: Option<i64>,
    pub last_failure_at: Option<i64>,
    /// `rate_limited`, `invalid_grant`, … (`grants.refresh_error`'s words).
    pub last_failure_kind: Option<String>,
}

impl Store {
    /// Every provider's row (one per provider that ever refreshed or failed to).
    pub async fn provider_health(&self) -> StoreResult<Vec<ProviderHealth>> {
        let query = sqlx::query_as::<_, ProviderHealth>(
            "SELECT provider, last_success_at, last_failure_at, last_failure_kind FROM provider_health ORDER BY provider",
        );
        Ok(query.fetch_all_in(self.read()).await?)
    }

    /// The provider's grants whose next refresh is held back past `now` by a backoff: exact up
    /// to [`COUNT_CAP`] (the partial index `grants_backoff` holds only grants with a backoff).
    pub async fn grants_in_backoff(&self, provider: &str, now: Timestamp) -> StoreResult<Count> {
        let (n,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM (SELECT 1 FROM grants WHERE provider = $1 AND refresh_not_before > $2 LIMIT $3) capped",
        )
        .bind(provider)
        .bind(now)
        .bind(COUNT_CAP + 1)
        .fetch_one_in(self.read())
        .await?;
        Ok(if n <= COUNT_CAP { Count::Exact(n) } else { Count::AtLeast(COUNT_CAP) })
    }
}
