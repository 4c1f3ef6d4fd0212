//! What the admin dashboard reads: hourly counts kept by triggers as the data changes
//! (migration 0028, `console_counts`), how each provider's refreshes went, and the rooms'
//! bounded counts. Each read is bounded by an index (the counts' primary key starts with the
//! hour), so the dashboard costs the same at a thousand rows or a million.

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::FetchIn;
use crate::store::machinery::counts::Count;
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::store::Store;

/// The handle on what the admin console counts: `store.console()`.
#[derive(Debug, Clone, Copy)]
pub struct Console<'s> {
    pub(in crate::store) store: &'s Store,
}

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

impl Console<'_> {
    /// Every hourly count from the hour holding `since` on: a range of the primary key, a few
    /// rows per hour and series value.
    pub async fn hourly_counts(self, since: Timestamp) -> StoreResult<Vec<HourCount>> {
        let query = sqlx::query_as::<_, HourCount>(
            "SELECT hour, series, label, sub, n FROM console_counts WHERE hour >= $1 ORDER BY hour, series, label, sub",
        )
        .bind(since - since.rem_euclid(3600));
        Ok(query.fetch_all_in(self.store.read()).await?)
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

impl Console<'_> {
    /// Every provider's row (one per provider that ever refreshed or failed to).
    pub async fn provider_health(self) -> StoreResult<Vec<ProviderHealth>> {
        let query = sqlx::query_as::<_, ProviderHealth>(
            "SELECT provider, last_success_at, last_failure_at, last_failure_kind FROM provider_health ORDER BY provider",
        );
        Ok(query.fetch_all_in(self.store.read()).await?)
    }
}

impl Console<'_> {
    /// The dashboard's counts, each bounded ([`crate::store::machinery::counts`]) and asked of
    /// the room that holds the rows, whose filters an index serves (migration 0020).
    pub async fn admin_counts(self, now: i64) -> StoreResult<AdminCounts> {
        let store = self.store;
        let (users, grants) = (store.users(), store.grants());
        let users = (users.count().await?, users.count_admins().await?, users.count_disabled().await?);
        let grants = (grants.count().await?, grants.count_needing_consent().await?);
        let authorizations = store.authorizations().counts(now).await?;
        Ok(AdminCounts {
            users: users.0,
            admins: users.1,
            disabled_users: users.2,
            grants: grants.0,
            grants_needing_consent: grants.1,
            open_authorizations: authorizations.open,
            completed_authorizations: authorizations.completed,
            declined_authorizations: authorizations.declined,
            failed_authorizations: authorizations.failed,
            expired_authorizations: authorizations.expired,
            consents: store.consents().count().await?,
            oauth_clients: store.oauth_clients().count().await?,
            services: store.services().count().await?,
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
