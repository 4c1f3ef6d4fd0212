//! The grant and authorization changes services with a webhook hear of, under the names they
//! had when each was its own statement: every one is a write noted with its event
//! ([`crate::store::machinery::write`]).

use crate::clock::Timestamp;
use crate::store::authorizations::approvals::{AllowOutcome, ConnectCompleted};
use crate::store::gateway::consents::NewGatewayConsent;
use crate::store::grants::consents::NewConsent;
use crate::store::grants::refresh_failure::RefreshFailure;
use crate::store::grants::row::{GrantRow, GrantStatus, SealedTokens};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::store::Store;
use crate::store::webhooks::events::NewEvent;

impl Store {
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
        self.upsert_grant(id, user_id, provider, account_label, tokens, now).noting(event, now).await
    }

    /// [`Store::record_refresh_failure`] with `event` beside it (the first failure of an
    /// episode).
    #[allow(clippy::too_many_arguments)]
    pub async fn record_refresh_failure_noting(
        &self,
        grant_id: &str,
        _user_id: &str,
        version: i64,
        holder: &str,
        not_before: Timestamp,
        now: Timestamp,
        kind: RefreshFailure,
        event: Option<&NewEvent>,
    ) -> StoreResult<()> {
        self.record_refresh_failure(grant_id, version, holder, not_before, kind).noting(event, now).await?;
        Ok(())
    }

    /// [`Store::store_refreshed_tokens`] with `event` beside it when the tokens were stored.
    pub async fn store_refreshed_tokens_noting(
        &self,
        grant_id: &str,
        _user_id: &str,
        redeemed: &[u8],
        tokens: &SealedTokens,
        now: Timestamp,
        event: Option<&NewEvent>,
    ) -> StoreResult<Option<GrantRow>> {
        self.store_refreshed_tokens(grant_id, redeemed, tokens, now).noting(event, now).await
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
        self.set_grant_status(&grant.id, grant.version, status, why, now).noting(event, now).await
    }

    /// [`Store::delete_grant_by_id`] with `event` beside it when the grant was there.
    pub async fn delete_grant_noting(
        &self,
        grant: &GrantRow,
        now: Timestamp,
        event: Option<&NewEvent>,
    ) -> StoreResult<bool> {
        self.delete_grant_by_id(&grant.id).noting(event, now).await
    }

    /// [`Store::decline_authorization`] with `event` beside it when the decline applied.
    pub async fn decline_authorization_noting(
        &self,
        id: &str,
        now: Timestamp,
        event: Option<&NewEvent>,
    ) -> StoreResult<bool> {
        self.decline_authorization(id, now).noting(event, now).await
    }

    /// [`Store::allow_client_written`], noting `event`.
    pub async fn allow_client(
        &self,
        new: &NewConsent<'_>,
        pair: Option<&NewGatewayConsent<'_>>,
        now: Timestamp,
        event: Option<&NewEvent>,
    ) -> StoreResult<AllowOutcome> {
        self.allow_client_written(new, pair, now).noting(event, now).await
    }

    /// [`Store::complete_connect_written`], noting `event`.
    pub async fn complete_connect(
        &self,
        authorization_id: &str,
        user_id: &str,
        consent: Option<&NewConsent<'_>>,
        pair: Option<&NewGatewayConsent<'_>>,
        now: Timestamp,
        event: Option<&NewEvent>,
    ) -> StoreResult<ConnectCompleted> {
        self.complete_connect_written(authorization_id, user_id, consent, pair, now).noting(event, now).await
    }
}
