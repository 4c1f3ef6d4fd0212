//! What the admin dashboard's charts read: hourly counts kept by triggers as the data changes
//! (migration 0028, `console_counts`), and the browser sessions alive now. Each read is bounded
//! by an index (the counts' primary key starts with the hour; sessions by expiry), so the
//! dashboard costs the same at a thousand rows or a million.

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::FetchIn;
use crate::store::machinery::counts::{COUNT_CAP, Count};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::store::Store;

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

impl Store {
    /// The dashboard's counts, each bounded (see [`Store::capped_count`]); each filter is
    /// served by an index (migration 0020). Open authorizations past their expiry count as
    /// expired, as the list shows them.
    pub async fn admin_counts(&self, now: i64) -> StoreResult<AdminCounts> {
        const OPEN: &str = "status IN ('pending', 'redirected', 'exchanging')";
        let count = |table: &'static str, filter: Option<&'static str>| self.capped_count(table, filter, now);
        Ok(AdminCounts {
            users: count("users", None).await?,
            admins: count("users", Some("is_admin <> 0")).await?,
            disabled_users: count("users", Some("disabled_at IS NOT NULL")).await?,
            grants: count("grants", None).await?,
            grants_needing_consent: count("grants", Some("status = 'needs_reconsent'")).await?,
            open_authorizations: self
                .capped_count("authorizations", Some(&format!("{OPEN} AND expires_at > {{now}}")), now)
                .await?,
            completed_authorizations: count("authorizations", Some("status = 'completed'")).await?,
            declined_authorizations: count("authorizations", Some("status = 'declined'")).await?,
            failed_authorizations: count("authorizations", Some("status = 'failed'")).await?,
            expired_authorizations: self
                .capped_count("authorizations", Some(&format!("{OPEN} AND expires_at <= {{now}}")), now)
                .await?,
            consents: count("client_consents", None).await?,
            oauth_clients: count("oauth_clients", None).await?,
            services: count("services", None).await?,
        })
    }
}

/// What the admin dashboard counts.
#[derive(Debug, Clone, Copy)]
pub struct AdminCounts {
    pub users: Count,
    pub admins: Count,
    pub disabled_users: Count,
    pub grants: Count,
    pub grants_needing_consent: Count,
    pub open_authorizations: Count,
    pub completed_authorizations: Count,
    pub declined_authorizations: Count,
    pub failed_authorizations: Count,
    pub expired_authorizations: Count,
    pub consents: Count,
    pub oauth_clients: Count,
    pub services: Count,
}
