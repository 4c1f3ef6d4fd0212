//! The token API's request budget per service, held across every instance on the database in
//! constant time per request: GCRA (the generic cell rate algorithm) on one row per service
//! (`api_budgets`, migration 0018), and shares of it leased by each instance so that most
//! requests touch no row at all.
//!
//! **The row.** A service with a budget of `N` requests a minute is charged `T = 60 s / N` per
//! request: its row holds the instant its account is paid up to (`paid_until_ns`, in
//! nanoseconds: the GCRA's "theoretical arrival time"). Taking `k` requests moves it to
//! `max(paid_until, now) + k·T`, in one conditional statement, and only if that is at most a
//! minute ahead of now; otherwise nothing changes and the request is refused. So a service may
//! spend up to a minute's budget at once, and after that one request every `T`; the statement
//! costs the same whatever the rate (the old sliding minute counted every request of the last
//! minute on each request).
//!
//! **The shares.** An instance does not charge the row once per request: it leases a share of
//! [`share_size`] requests at once (a tenth of a second at the full rate, at least one, at most
//! [`MAX_SHARE`]) and answers from it in memory until it is used up or [`SHARE_LIFE`] has
//! passed. What was left of a lapsed share is given back with the next lease (one statement).
//! Slack across instances, stated in `docs/token-api.md`: in any window each instance may
//! answer up to one share more than the row alone would allow (units charged just before the
//! window, used in it), and a refusal may come while up to one share per other instance sits
//! unused there, for at most [`SHARE_LIFE`]. A service whose budget is below 1,200 a minute has
//! shares of one request: exact.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{CacheEffect, FetchIn, Store, StoreResult};
use crate::clock::Timestamp;

/// The longest a service's account may run ahead of the clock: its burst, one minute's budget.
pub const WINDOW_NS: i64 = 60_000_000_000;
/// The most requests one lease takes.
pub const MAX_SHARE: u32 = 100;
/// How long an instance answers from a share before it gives the rest back.
pub const SHARE_LIFE: Duration = Duration::from_secs(1);

/// How many requests one lease takes for a budget of `per_minute`: a tenth of a second's worth
/// at the full rate, between 1 and [`MAX_SHARE`].
pub fn share_size(per_minute: u32) -> u32 {
    (per_minute / 600).clamp(1, MAX_SHARE)
}

/// Nanoseconds each request costs on a budget of `per_minute` (any `u32` budget is at least
/// 13 ns, so none rounds to nothing).
fn cost_ns(per_minute: u32) -> i64 {
    (WINDOW_NS / i64::from(per_minute.max(1))).max(1)
}

/// This instance's leased shares, by service id. One lease at a time per service: requests
/// that find the share used up wait for the lease under way rather than each leasing their
/// own, so an instance never holds more than one share's unused requests of a service.
#[derive(Debug, Default)]
pub struct BudgetShares {
    shares: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Share>>>>,
}

#[derive(Debug, Default)]
struct Share {
    left: u32,
    leased_at: Option<Instant>,
}

impl Share {
    /// One request from the share if it is live and not used up.
    fn take(&mut self) -> bool {
        let live = self.leased_at.is_some_and(|at| at.elapsed() < SHARE_LIFE);
        if live && self.left > 0 {
            self.left -= 1;
            return true;
        }
        false
    }

    /// What is left of a share that lapsed unused (to give back), forgetting it.
    fn lapsed(&mut self) -> u32 {
        let unused = if self.leased_at.is_some_and(|at| at.elapsed() >= SHARE_LIFE) { self.left } else { 0 };
        *self = Share::default();
        unused
    }
}

impl BudgetShares {
    fn of(&self, service_id: &str) -> Arc<tokio::sync::Mutex<Share>> {
        let mut shares = self.shares.lock().unwrap_or_else(|p| p.into_inner());
        shares.entry(service_id.to_owned()).or_default().clone()
    }
}

/// Whether a request may be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    Taken,
    /// Used up: the next request fits in this many seconds (at least 1).
    Refused {
        retry_after: u64,
    },
}

impl Store {
    /// Takes one request from `service_id`'s budget of `per_minute` at `now` (Unix seconds).
    pub async fn request_budget_take(&self, service_id: &str, now: Timestamp, per_minute: u32) -> StoreResult<Budget> {
        let share = self.budget_shares.of(service_id);
        let mut share = share.lock().await;
        if share.take() {
            return Ok(Budget::Taken);
        }
        let unused = share.lapsed();
        let now_ns = now.saturating_mul(1_000_000_000);
        let cost = cost_ns(per_minute);
        let size = share_size(per_minute);
        if self.budget_lease(service_id, now_ns, i64::from(size) * cost, i64::from(unused) * cost).await? {
            *share = Share { left: size - 1, leased_at: Some(Instant::now()) };
            return Ok(Budget::Taken);
        }
        // Near the edge a whole share may not fit where one request still does.
        if size > 1 && self.budget_lease(service_id, now_ns, cost, 0).await? {
            return Ok(Budget::Taken);
        }
        let paid_until = self.budget_paid_until(service_id).await?.unwrap_or(now_ns);
        let wait_ns = paid_until + cost - WINDOW_NS - now_ns;
        Ok(Budget::Refused { retry_after: (wait_ns.max(1) as u64).div_ceil(1_000_000_000) })
    }

    /// Moves the account by `charge` ns (after giving back `give_back` ns of a lapsed share)
    /// if it stays within a minute of `now_ns`; true when it did. One statement.
    async fn budget_lease(&self, service_id: &str, now_ns: i64, charge: i64, give_back: i64) -> StoreResult<bool> {
        let _turn = self.hot_write_turn().await;
        // `from` is max(paid_until - give_back, now): an account paid up in the past starts now.
        let row: Option<(i64,)> = sqlx::query_as(
            "INSERT INTO api_budgets (service_id, paid_until_ns) VALUES ($1, $2 + $3) \
             ON CONFLICT (service_id) DO UPDATE SET paid_until_ns = \
               (CASE WHEN api_budgets.paid_until_ns - $5 > $2 THEN api_budgets.paid_until_ns - $5 ELSE $2 END) + $3 \
             WHERE (CASE WHEN api_budgets.paid_until_ns - $5 > $2 THEN api_budgets.paid_until_ns - $5 ELSE $2 END) \
               + $3 - $2 <= $4 \
             RETURNING paid_until_ns",
        )
        .bind(service_id)
        .bind(now_ns)
        .bind(charge)
        .bind(WINDOW_NS)
        .bind(give_back)
        .fetch_optional(self.write(CacheEffect::Nothing))
        .await?;
        Ok(row.is_some())
    }

    async fn budget_paid_until(&self, service_id: &str) -> StoreResult<Option<i64>> {
        let row: Option<(i64,)> = sqlx::query_as("SELECT paid_until_ns FROM api_budgets WHERE service_id = $1")
            .bind(service_id)
            .fetch_optional_in(self.read())
            .await?;
        Ok(row.map(|(at,)| at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::migrated_for_tests as store;

    #[test]
    fn a_share_is_a_tenth_of_a_second_at_the_full_rate_within_bounds() {
        assert_eq!(share_size(1), 1);
        assert_eq!(share_size(1_199), 1);
        assert_eq!(share_size(6_000), 10);
        assert_eq!(share_size(60_000), 100);
        assert_eq!(share_size(u32::MAX), MAX_SHARE);
    }

    #[tokio::test]
    async fn a_minute_of_budget_at_once_then_one_request_per_cost_and_retry_after_says_when() {
        let (_dir, store) = store().await;
        let now = 1_000_000;
        for i in 0..6 {
            assert_eq!(store.request_budget_take("svc_a", now, 6).await.unwrap(), Budget::Taken, "request {i}");
        }
        // Each request costs 10 s: the seventh fits 10 s from now.
        assert_eq!(store.request_budget_take("svc_a", now, 6).await.unwrap(), Budget::Refused { retry_after: 10 });
        assert_eq!(store.request_budget_take("svc_b", now, 6).await.unwrap(), Budget::Taken, "per service");
        assert_eq!(store.request_budget_take("svc_a", now + 9, 6).await.unwrap(), Budget::Refused { retry_after: 1 });
        assert_eq!(store.request_budget_take("svc_a", now + 10, 6).await.unwrap(), Budget::Taken);
        assert_eq!(store.request_budget_take("svc_a", now + 10, 6).await.unwrap(), Budget::Refused { retry_after: 10 });
    }

    #[tokio::test]
    async fn shares_answer_from_memory_and_never_exceed_the_budget_on_one_instance() {
        let (_dir, store) = store().await;
        let now = 2_000_000;
        let per_minute = 6_000; // shares of 10
        let mut taken = 0;
        while store.request_budget_take("svc_a", now, per_minute).await.unwrap() == Budget::Taken {
            taken += 1;
            assert!(taken <= per_minute, "the budget holds");
        }
        assert_eq!(taken, per_minute, "the whole minute is usable, to the last request");
        let queries = store.queries_run();
        // A second instance on the same row (its own shares) gets nothing either.
        let other = Store { budget_shares: Default::default(), ..store.clone() };
        assert!(matches!(other.request_budget_take("svc_a", now, per_minute).await.unwrap(), Budget::Refused { .. }));
        assert!(store.queries_run() > queries);
    }
}
