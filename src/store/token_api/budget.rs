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
//!
//! **Leasing ahead.** When half of a share of two or more is used, the next share is leased in
//! the background and added to what is left, so a busy service's requests never wait for the
//! database: before, every request arriving while a share was renewed waited for the lease
//! (on SQLite behind the audit writer's batch, on PostgreSQL for a commit), and at 20,000
//! requests a second that was a stall every 5 ms (on PostgreSQL, most of the token API's p99 at
//! full rate: 3.0 ms before, 1.6 ms after, `docs/performance.md`). Only one lease
//! of a service is under way at a time on an instance; one the budget refuses is not tried
//! again before the share runs out, and the request that finds it empty leases as before.
//! Leasing ahead works only if half a share outlasts a lease: a share is a tenth of a second of
//! the budget, so at the full rate a lease has 50 ms to land. Shares used to stop at 100
//! requests, so a service with a budget above 60,000 a minute, served at 28,000 a second, used
//! one up in 3.5 ms, and the lease ahead, waiting on SQLite behind the audit writer's batch
//! (a few milliseconds), landed too late: every few milliseconds all the service's requests
//! waited for it (the token API's p99 at full rate on SQLite: 3.8 ms with shares of 100,
//! 1.1 ms with shares of a tenth of a second).
//!
//! Slack across instances, stated in `docs/token-api.md`: an instance holds at most
//! [`most_unused`] requests leased and not yet answered (one and a half shares), so in any
//! window each instance may answer up to that many more than the row alone would allow (units
//! charged just before the window, used in it), and a refusal may come while up to that many
//! per other instance sit unused there, for at most [`SHARE_LIFE`] after its last lease. A
//! service whose budget is below 1,200 a minute has shares of one request: exact.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::kept::Kept;
use crate::store::machinery::store::Store;

/// The handle on the token API's request budgets: `store.request_budgets()`.
#[derive(Debug, Clone, Copy)]
pub struct RequestBudgets<'s> {
    pub(in crate::store) store: &'s Store,
}

/// The longest a service's account may run ahead of the clock: its burst, one minute's budget.
pub const WINDOW_NS: i64 = 60_000_000_000;
/// The most requests one lease takes: a tenth of a second of a budget of six million a minute.
/// Only a bound on what one lease may hold; below that budget a share is the full tenth of a
/// second, and the slack across instances is a fixed part of the budget (see the module).
pub const MAX_SHARE: u32 = 10_000;
/// How long an instance answers from a share before it gives the rest back.
pub const SHARE_LIFE: Duration = Duration::from_secs(1);

/// How many requests one lease takes for a budget of `per_minute`: a tenth of a second's worth
/// at the full rate, between 1 and [`MAX_SHARE`].
pub fn share_size(per_minute: u32) -> u32 {
    (per_minute / 600).clamp(1, MAX_SHARE)
}

/// The most requests one instance holds leased and not yet answered for a budget of
/// `per_minute`: half a share left when the next is leased ahead, and that share.
pub fn most_unused(per_minute: u32) -> u32 {
    let size = share_size(per_minute);
    if size > 1 { size + size / 2 } else { 0 }
}

/// Nanoseconds each request costs on a budget of `per_minute` (any `u32` budget is at least
/// 13 ns, so none rounds to nothing).
fn cost_ns(per_minute: u32) -> i64 {
    (WINDOW_NS / i64::from(per_minute.max(1))).max(1)
}

/// This instance's leased shares, by service id.
#[derive(Debug, Default)]
pub(in crate::store) struct BudgetShares {
    shares: Mutex<HashMap<String, Arc<ServiceShare>>>,
}

/// One service's share on this instance.
#[derive(Debug, Default)]
struct ServiceShare {
    /// What is left; locked only to count, never across an await.
    share: Mutex<Share>,
    /// Held by whoever leases for the service (the lease ahead, or a request that found the
    /// share used up): one lease at a time, so requests that find the share used up wait for
    /// the lease under way rather than each leasing their own, and an instance never holds
    /// more than [`most_unused`].
    leasing: Arc<tokio::sync::Mutex<()>>,
}

#[derive(Debug, Default)]
struct Share {
    left: u32,
    leased_at: Option<Instant>,
    /// The lease ahead was started since the last lease landed: it is started once per share,
    /// and one the budget refused is not tried again until a request leases in the foreground.
    ahead_started: bool,
}

impl Share {
    fn live(&self) -> bool {
        self.leased_at.is_some_and(|at| at.elapsed() < SHARE_LIFE)
    }

    /// One request from the share if it is live and not used up.
    fn take(&mut self) -> bool {
        if self.live() && self.left > 0 {
            self.left -= 1;
            return true;
        }
        false
    }

    /// What is left of a share that lapsed unused (to give back), forgetting it.
    fn lapsed(&mut self) -> u32 {
        let unused = if self.leased_at.is_some() && !self.live() { self.left } else { 0 };
        *self = Share::default();
        unused
    }

    /// A lease ahead of `size` landed: its requests join what is left, and the share's life
    /// starts again (what is left was charged to the row, so it may as well be used).
    fn extend(&mut self, size: u32) {
        self.left += size;
        self.leased_at = Some(Instant::now());
        self.ahead_started = false;
    }
}

/// What a request got from the share in memory.
enum FromMemory {
    Taken,
    /// Taken, and half the share is used: the caller leases the next one ahead, holding this.
    TakenLeaseAhead(tokio::sync::OwnedMutexGuard<()>),
    Empty,
}

impl ServiceShare {
    fn take(&self, size: u32) -> FromMemory {
        let mut share = self.share.lock().unwrap_or_else(|p| p.into_inner());
        if !share.take() {
            return FromMemory::Empty;
        }
        if size > 1 && !share.ahead_started && share.left <= size / 2 {
            // Busy: a request is leasing in the foreground, which refills the share anyway.
            if let Ok(leasing) = self.leasing.clone().try_lock_owned() {
                share.ahead_started = true;
                return FromMemory::TakenLeaseAhead(leasing);
            }
        }
        FromMemory::Taken
    }
}

impl Kept for BudgetShares {}

impl BudgetShares {
    fn of(&self, service_id: &str) -> Arc<ServiceShare> {
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

impl RequestBudgets<'_> {
    /// Takes one request from `service_id`'s budget of `per_minute` at `now` (Unix seconds).
    pub async fn take(self, service_id: &str, now: Timestamp, per_minute: u32) -> StoreResult<Budget> {
        let service = self.store.kept::<BudgetShares>().of(service_id);
        let now_ns = now.saturating_mul(1_000_000_000);
        let cost = cost_ns(per_minute);
        let size = share_size(per_minute);
        match service.take(size) {
            FromMemory::Taken => return Ok(Budget::Taken),
            FromMemory::TakenLeaseAhead(leasing) => {
                self.lease_ahead(service, leasing, service_id, now_ns, i64::from(size) * cost, size);
                return Ok(Budget::Taken);
            }
            FromMemory::Empty => {}
        }
        let _leasing = service.leasing.lock().await;
        // The lease under way while this request waited may have landed.
        let unused = {
            let mut share = service.share.lock().unwrap_or_else(|p| p.into_inner());
            if share.take() {
                return Ok(Budget::Taken);
            }
            share.lapsed()
        };
        if self.lease(service_id, now_ns, i64::from(size) * cost, i64::from(unused) * cost).await? {
            *service.share.lock().unwrap_or_else(|p| p.into_inner()) =
                Share { left: size - 1, leased_at: Some(Instant::now()), ahead_started: false };
            return Ok(Budget::Taken);
        }
        // Near the edge a whole share may not fit where one request still does.
        if size > 1 && self.lease(service_id, now_ns, cost, 0).await? {
            return Ok(Budget::Taken);
        }
        let paid_until = self.paid_until(service_id).await?.unwrap_or(now_ns);
        let wait_ns = paid_until + cost - WINDOW_NS - now_ns;
        Ok(Budget::Refused { retry_after: (wait_ns.max(1) as u64).div_ceil(1_000_000_000) })
    }

    /// Leases the next share of `size` requests (`charge` ns) in the background, holding the
    /// service's lease until it landed: see the module.
    fn lease_ahead(
        self,
        service: Arc<ServiceShare>,
        leasing: tokio::sync::OwnedMutexGuard<()>,
        service_id: &str,
        now_ns: i64,
        charge: i64,
        size: u32,
    ) {
        let (store, service_id) = (self.store.clone(), service_id.to_owned());
        tokio::spawn(async move {
            let _leasing = leasing;
            match store.request_budgets().lease(&service_id, now_ns, charge, 0).await {
                Ok(true) => service.share.lock().unwrap_or_else(|p| p.into_inner()).extend(size),
                // Near the edge: the request that finds the share used up leases what still fits.
                Ok(false) => {}
                Err(error) => {
                    tracing::debug!(%error, "token API: could not lease a budget share ahead; the next request leases it")
                }
            }
        });
    }

    /// Waits for the lease under way for `service_id`, if any (tests).
    #[cfg(test)]
    async fn leases_settled(self, service_id: &str) {
        drop(self.store.kept::<BudgetShares>().of(service_id).leasing.lock().await);
    }

    /// Moves the account by `charge` ns (after giving back `give_back` ns of a lapsed share)
    /// if it stays within a minute of `now_ns`; true when it did. One statement.
    async fn lease(self, service_id: &str, now_ns: i64, charge: i64, give_back: i64) -> StoreResult<bool> {
        let _turn = self.store.hot_write_turn().await;
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
        .fetch_optional(self.store.write(CacheEffect::Nothing))
        .await?;
        Ok(row.is_some())
    }

    async fn paid_until(self, service_id: &str) -> StoreResult<Option<i64>> {
        let row: Option<(i64,)> = sqlx::query_as("SELECT paid_until_ns FROM api_budgets WHERE service_id = $1")
            .bind(service_id)
            .fetch_optional_in(self.store.read())
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
        assert_eq!(share_size(1_680_000), 2_800);
        assert_eq!(share_size(u32::MAX), MAX_SHARE);
    }

    #[test]
    fn at_the_full_rate_half_a_share_gives_a_lease_ahead_50_ms_to_land_for_budgets_up_to_six_million() {
        // The lease ahead starts when half a share is left; the requests of the service wait
        // for it only if that half is used before the lease lands (on SQLite it waits behind
        // the audit writer's batch). With shares capped at 100, a budget of 1.68 million a
        // minute (28,000 a second) left the lease 1.8 ms.
        for per_minute in [1_200, 6_000, 60_000, 600_000, 1_680_000, 6_000_000] {
            // Half a share lasts (share / 2) · 60,000 ms / per_minute at the full rate.
            let half_a_share_ms_times_budget = u64::from(share_size(per_minute) / 2) * 60_000;
            assert!(half_a_share_ms_times_budget >= 50 * u64::from(per_minute), "{per_minute} a minute");
        }
        // Above six million a minute the share stops growing: the slack stays bounded.
        assert_eq!(most_unused(u32::MAX), 15_000);
    }

    #[tokio::test]
    async fn a_minute_of_budget_at_once_then_one_request_per_cost_and_retry_after_says_when() {
        let (_dir, store) = store().await;
        let now = 1_000_000;
        for i in 0..6 {
            assert_eq!(store.request_budgets().take("svc_a", now, 6).await.unwrap(), Budget::Taken, "request {i}");
        }
        // Each request costs 10 s: the seventh fits 10 s from now.
        assert_eq!(store.request_budgets().take("svc_a", now, 6).await.unwrap(), Budget::Refused { retry_after: 10 });
        assert_eq!(store.request_budgets().take("svc_b", now, 6).await.unwrap(), Budget::Taken, "per service");
        assert_eq!(
            store.request_budgets().take("svc_a", now + 9, 6).await.unwrap(),
            Budget::Refused { retry_after: 1 }
        );
        assert_eq!(store.request_budgets().take("svc_a", now + 10, 6).await.unwrap(), Budget::Taken);
        assert_eq!(
            store.request_budgets().take("svc_a", now + 10, 6).await.unwrap(),
            Budget::Refused { retry_after: 10 }
        );
    }

    #[test]
    fn an_instance_holds_at_most_a_share_and_a_half_unused() {
        assert_eq!(most_unused(1_199), 0, "shares of one are taken as they are leased");
        assert_eq!(most_unused(1_200), 3);
        assert_eq!(most_unused(60_000), 150);
    }

    fn left(store: &Store, service_id: &str) -> u32 {
        store.kept::<BudgetShares>().of(service_id).share.lock().unwrap().left
    }

    #[tokio::test]
    async fn the_next_share_is_leased_ahead_when_half_is_used_so_no_request_waits_for_it() {
        let (_dir, store) = store().await;
        let now = 3_000_000;
        let (per_minute, size) = (6_000, 10); // each request costs 10 ms of the minute
        let cost = cost_ns(per_minute);
        let now_ns = now * 1_000_000_000;
        // The first request leases in the foreground; three more leave six of the ten.
        for _ in 0..4 {
            assert_eq!(store.request_budgets().take("svc_a", now, per_minute).await.unwrap(), Budget::Taken);
        }
        store.request_budgets().leases_settled("svc_a").await;
        assert_eq!(left(&store, "svc_a"), 6, "more than half left: nothing leased ahead");
        assert_eq!(store.request_budgets().paid_until("svc_a").await.unwrap(), Some(now_ns + size * cost));
        // The fifth leaves half: the next share is leased in the background and joins the rest.
        assert_eq!(store.request_budgets().take("svc_a", now, per_minute).await.unwrap(), Budget::Taken);
        store.request_budgets().leases_settled("svc_a").await;
        assert_eq!(left(&store, "svc_a"), 5 + 10);
        assert_eq!(store.request_budgets().paid_until("svc_a").await.unwrap(), Some(now_ns + 2 * size * cost));
        // Its requests are answered from memory, each share leased once, ahead.
        let queries = store.queries_run();
        for _ in 0..10 {
            assert_eq!(store.request_budgets().take("svc_a", now, per_minute).await.unwrap(), Budget::Taken);
        }
        store.request_budgets().leases_settled("svc_a").await;
        assert_eq!(store.queries_run() - queries, 1, "one lease for ten requests, made ahead");
        assert_eq!(left(&store, "svc_a"), 5 + 10);
        assert_eq!(store.request_budgets().paid_until("svc_a").await.unwrap(), Some(now_ns + 3 * size * cost));
    }

    #[tokio::test]
    async fn a_lease_ahead_the_budget_refuses_is_not_tried_again_until_the_share_is_used_up() {
        let (_dir, store) = store().await;
        let now = 4_000_000;
        let per_minute = 6_000; // shares of 10
        let cost = cost_ns(per_minute);
        // Another instance spent all of the minute but 15 requests: a share, then half of one.
        assert!(store.request_budgets().lease("svc_a", now * 1_000_000_000, (6_000 - 15) * cost, 0).await.unwrap());
        for _ in 0..5 {
            assert_eq!(store.request_budgets().take("svc_a", now, per_minute).await.unwrap(), Budget::Taken);
        }
        store.request_budgets().leases_settled("svc_a").await;
        assert_eq!(left(&store, "svc_a"), 5, "the lease ahead did not fit");
        let queries = store.queries_run();
        for _ in 0..5 {
            assert_eq!(store.request_budgets().take("svc_a", now, per_minute).await.unwrap(), Budget::Taken);
        }
        store.request_budgets().leases_settled("svc_a").await;
        assert_eq!(store.queries_run(), queries, "a refused lease ahead is not tried on every request");
        // The share used up, requests lease what still fits one by one, to the last.
        let mut taken = 0;
        while store.request_budgets().take("svc_a", now, per_minute).await.unwrap() == Budget::Taken {
            taken += 1;
        }
        assert_eq!(taken, 5);
    }

    #[tokio::test]
    async fn shares_answer_from_memory_and_never_exceed_the_budget_on_one_instance() {
        let (_dir, store) = store().await;
        let now = 2_000_000;
        let per_minute = 6_000; // shares of 10
        let mut taken = 0;
        while store.request_budgets().take("svc_a", now, per_minute).await.unwrap() == Budget::Taken {
            taken += 1;
            assert!(taken <= per_minute, "the budget holds");
        }
        assert_eq!(taken, per_minute, "the whole minute is usable, to the last request");
        let queries = store.queries_run();
        // A second instance on the same row (its own shares) gets nothing either.
        let other = store.beside_with_own_memory();
        assert!(matches!(
            other.request_budgets().take("svc_a", now, per_minute).await.unwrap(),
            Budget::Refused { .. }
        ));
        assert!(store.queries_run() > queries);
    }
}
