//! Grant and authorization changes that services with a webhook hear of: the same statements as
//! [`crate::store::grants`] and [`crate::store::authorizations`], with the event written in the
//! same transaction ([`crate::store::webhooks::outbox`]), so a change is never committed without
//! its event nor an event without its change.
//!
//! Cost: when no service with a webhook may use the provider (the cached
//! [`Store::webhook_targets`]), each call is the plain statement, with no extra round trip;
//! otherwise the statement and one INSERT (fanned out to every such service by its SELECT) in one
//! transaction.

use sqlx::AnyConnection;

use crate::clock::Timestamp;
use crate::store::authorizations::row::DECLINE_AUTHORIZATION;
use crate::store::grants::refresh_failure::RefreshFailure;
use crate::store::grants::row::{
    DELETE_GRANT_BY_ID, GrantRow, GrantStatus, RECORD_REFRESH_FAILURE, RawGrantRow, SET_GRANT_STATUS, SealedTokens,
    UPSERT_GRANT, store_refreshed_tokens_sql,
};
use crate::store::machinery::cache_effect::{CacheEffect, ReturnedUser};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::store::Store;
use crate::store::webhooks::outbox::{INSERT_EVENT, NewEvent, new_event_id, provider_pattern};

/// Writes `event` on `conn` (inside the caller's transaction). How many services it reached.
pub(in crate::store) async fn insert_event_in(
    conn: &mut AnyConnection,
    event: &NewEvent,
    now: Timestamp,
) -> StoreResult<u64> {
    let event_id = new_event_id();
    let done = sqlx::query(INSERT_EVENT)
        .bind(&event_id)
        .bind(event.event_type.as_str())
        .bind(event.ordering_key())
        .bind(None::<String>)
        .bind(event.body(&event_id, now))
        .bind(now)
        .bind(provider_pattern(&event.provider))
        .bind(event.service_id.as_deref())
        .execute(&mut *conn)
        .await
        .map_err(StoreError::from_write)?;
    Ok(done.rows_affected())
}

impl Store {
    /// `event` if some service with a live webhook would hear of it, else `None` (cached).
    pub async fn event_worth_writing<'e>(&self, event: Option<&'e NewEvent>) -> StoreResult<Option<&'e NewEvent>> {
        let Some(event) = event else { return Ok(None) };
        let targets = self.webhook_targets().await?;
        let wanted = match &event.service_id {
            Some(service) => targets.services.contains(service),
            None => targets.providers.contains(&event.provider),
        };
        Ok(wanted.then_some(event))
    }

    /// [`Store::upsert_grant`] with `event` written beside it when the upsert applied.
    #[allow(clippy::too_many_arguments)]
    pub async fn upsert_grant_noting(
        &self,
        id: &str,
        user_id: &str,
        provider: &str,
        account_label: Option<&str>,
        tokens: &SealedTokens,
        now: Timestamp,
        event: Option<&NewEvent>,
    ) -> StoreResult<bool> {
        let Some(event) = self.event_worth_writing(event).await? else {
            return self.upsert_grant(id, user_id, provider, account_label, tokens, now).await;
        };
        self.bounded(async {
            let mut tx = self.begin(CacheEffect::User(user_id)).await?;
            let done = sqlx::query(UPSERT_GRANT)
                .bind(id)
                .bind(user_id)
                .bind(provider)
                .bind(account_label.unwrap_or(""))
                .bind(tokens.scopes.to_space_separated())
                .bind(&tokens.access_token_sealed)
                .bind(&tokens.refresh_token_sealed)
                .bind(&tokens.key_id)
                .bind(tokens.expires_at)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::from_write)?;
            if done.rows_affected() != 1 {
                tx.rollback().await?;
                return Ok(false);
            }
            insert_event_in(&mut tx, event, now).await?;
            tx.commit().await?;
            self.wake_webhooks();
            Ok(true)
        })
        .await
    }

    /// [`Store::record_refresh_failure`] with `event` beside it (the first failure of an
    /// episode). `user_id` owns the grant.
    #[allow(clippy::too_many_arguments)]
    pub async fn record_refresh_failure_noting(
        &self,
        grant_id: &str,
        user_id: &str,
        version: i64,
        holder: &str,
        not_before: Timestamp,
        now: Timestamp,
        kind: RefreshFailure,
        event: Option<&NewEvent>,
    ) -> StoreResult<()> {
        let Some(event) = self.event_worth_writing(event).await? else {
            return self.record_refresh_failure(grant_id, version, holder, not_before, kind).await;
        };
        self.bounded(async {
            let mut tx = self.begin(CacheEffect::User(user_id)).await?;
            let changed = sqlx::query_as::<_, ReturnedUser>(RECORD_REFRESH_FAILURE)
                .bind(not_before)
                .bind(grant_id)
                .bind(version)
                .bind(holder)
                .bind(kind.as_str())
                .fetch_optional(&mut *tx)
                .await?;
            if changed.is_some() {
                insert_event_in(&mut tx, event, now).await?;
            }
            tx.commit().await?;
            self.wake_webhooks();
            Ok(())
        })
        .await
    }

    /// [`Store::store_refreshed_tokens`] with `event` beside it when the tokens were stored.
    pub async fn store_refreshed_tokens_noting(
        &self,
        grant_id: &str,
        user_id: &str,
        redeemed: &[u8],
        tokens: &SealedTokens,
        now: Timestamp,
        event: Option<&NewEvent>,
    ) -> StoreResult<Option<GrantRow>> {
        let Some(event) = self.event_worth_writing(event).await? else {
            return self.store_refreshed_tokens(grant_id, redeemed, tokens, now).await;
        };
        self.bounded(async {
            let mut tx = self.begin(CacheEffect::User(user_id)).await?;
            let sql = store_refreshed_tokens_sql();
            let stored = sqlx::query_as::<_, RawGrantRow>(&sql)
                .bind(&tokens.access_token_sealed)
                .bind(&tokens.refresh_token_sealed)
                .bind(&tokens.key_id)
                .bind(tokens.expires_at)
                .bind(tokens.scopes.to_space_separated())
                .bind(now)
                .bind(grant_id)
                .bind(redeemed)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(stored) = stored else {
                tx.rollback().await?;
                return Ok(None);
            };
            insert_event_in(&mut tx, event, now).await?;
            tx.commit().await?;
            self.wake_webhooks();
            GrantRow::try_from(stored).map(Some)
        })
        .await
    }

    /// [`Store::set_grant_status`] with `event` beside it when the status changed.
    pub async fn set_grant_status_noting(
        &self,
        grant: &GrantRow,
        status: GrantStatus,
        why: Option<RefreshFailure>,
        now: Timestamp,
        event: Option<&NewEvent>,
    ) -> StoreResult<bool> {
        let Some(event) = self.event_worth_writing(event).await? else {
            return self.set_grant_status(&grant.id, grant.version, status, why, now).await;
        };
        self.bounded(async {
            let mut tx = self.begin(CacheEffect::User(&grant.user_id)).await?;
            let changed = sqlx::query_as::<_, ReturnedUser>(SET_GRANT_STATUS)
                .bind(status.as_str())
                .bind(now)
                .bind(&grant.id)
                .bind(grant.version)
                .bind(why.map(RefreshFailure::as_str))
                .fetch_optional(&mut *tx)
                .await?;
            if changed.is_none() {
                tx.rollback().await?;
                return Ok(false);
            }
            insert_event_in(&mut tx, event, now).await?;
            tx.commit().await?;
            self.wake_webhooks();
            Ok(true)
        })
        .await
    }

    /// [`Store::delete_grant_by_id`] with `event` beside it when the grant was there.
    pub async fn delete_grant_noting(
        &self,
        grant: &GrantRow,
        now: Timestamp,
        event: Option<&NewEvent>,
    ) -> StoreResult<bool> {
        let Some(event) = self.event_worth_writing(event).await? else {
            return self.delete_grant_by_id(&grant.id).await;
        };
        self.bounded(async {
            let mut tx = self.begin(CacheEffect::User(&grant.user_id)).await?;
            let deleted =
                sqlx::query_as::<_, ReturnedUser>(DELETE_GRANT_BY_ID).bind(&grant.id).fetch_optional(&mut *tx).await?;
            if deleted.is_none() {
                tx.rollback().await?;
                return Ok(false);
            }
            insert_event_in(&mut tx, event, now).await?;
            tx.commit().await?;
            self.wake_webhooks();
            Ok(true)
        })
        .await
    }

    /// [`Store::decline_authorization`] with `event` beside it when the decline applied.
    pub async fn decline_authorization_noting(
        &self,
        id: &str,
        now: Timestamp,
        event: Option<&NewEvent>,
    ) -> StoreResult<bool> {
        let Some(event) = self.event_worth_writing(event).await? else {
            return self.decline_authorization(id, now).await;
        };
        self.bounded(async {
            let mut tx = self.begin(CacheEffect::Nothing).await?;
            let done = sqlx::query(DECLINE_AUTHORIZATION).bind(now).bind(id).execute(&mut *tx).await?;
            if done.rows_affected() != 1 {
                tx.rollback().await?;
                return Ok(false);
            }
            insert_event_in(&mut tx, event, now).await?;
            tx.commit().await?;
            self.wake_webhooks();
            Ok(true)
        })
        .await
    }
}
