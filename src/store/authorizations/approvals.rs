//! An authorization that ends with what it approves, in one transaction: the row completes and
//! the client's consent (or the (client, server) pair) is recorded, both or neither, so nobody
//! reads the row completed while its client may not yet use what the user allowed. Each is a
//! write ([`crate::store::machinery::write`]): a service's authorization completes beside its
//! `authorization.completed` event. The consent and the pair are recorded by their rooms' own
//! statements ([`crate::store::grants::consents`], [`crate::store::gateway::consents`]).

use crate::clock::Timestamp;
use crate::store::authorizations::row::Authorizations;
use crate::store::gateway::consents::NewGatewayConsent;
use crate::store::grants::consents::NewConsent;
use crate::store::machinery::cache_effect::CacheEffect;
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::transaction::Transaction;
use crate::store::machinery::write::{On, Steps, Written};

/// How [`Authorizations::complete_connect`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectCompleted {
    /// The row is completed; the client's consent recorded with it when one was asked for and
    /// the grant was still there.
    Completed { consent_recorded: bool },
    /// The row had finished meanwhile (declined in the client): nothing changed.
    FinishedMeanwhile,
}

/// How approving a consent-only authorization went ([`Authorizations::allow_client`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowOutcome {
    /// The authorization completed and the consent is recorded, together.
    Allowed,
    /// The authorization was no longer pending (approved, declined or expired meanwhile).
    NotPending,
    /// The grant is gone or not the user's: nothing changed.
    GrantGone,
}

/// How approving a `server` authorization went ([`Authorizations::approve_gateway_pair`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairOutcome {
    /// The authorization completed and the approval is recorded, together.
    Approved,
    /// The authorization was no longer pending (approved, declined or expired meanwhile).
    NotPending,
    /// The server was removed: nothing changed.
    ServerGone,
}

/// [`Authorizations::allow_client`].
pub struct AllowClient<'a> {
    new: &'a NewConsent<'a>,
    pair: Option<&'a NewGatewayConsent<'a>>,
    now: Timestamp,
}

impl Steps for AllowClient<'_> {
    type Done = AllowOutcome;

    async fn steps(&self, tx: &mut Transaction<'_>) -> StoreResult<AllowOutcome> {
        let (store, new) = (tx.store(), self.new);
        let completed = sqlx::query(
            "UPDATE authorizations SET status = 'completed', updated_at = $1 \
             WHERE id = $2 AND user_id = $3 AND kind = 'consent' AND status = 'pending' AND expires_at > $1",
        )
        .bind(self.now)
        .bind(new.authorization_id)
        .bind(new.user_id);
        if On::Within(tx).execute(CacheEffect::Nothing, completed).await?.rows_affected() != 1 {
            return Ok(AllowOutcome::NotPending);
        }
        let consent =
            store.consents().record(new.grant_id, new.user_id, new.client_key, new.client_name, new.scopes, self.now);
        if !consent.within(tx).await? {
            return Ok(AllowOutcome::GrantGone);
        }
        // A server removed meanwhile: nothing of it to approve; the grant's consent stands.
        if let Some(pair) = self.pair {
            store.gateway_consents().record(pair, self.now).within(tx).await?;
        }
        Ok(AllowOutcome::Allowed)
    }

    fn applied(done: &AllowOutcome) -> bool {
        matches!(done, AllowOutcome::Allowed)
    }
}

/// [`Authorizations::complete_connect`].
pub struct CompleteConnect<'a> {
    authorization_id: &'a str,
    user_id: &'a str,
    consent: Option<&'a NewConsent<'a>>,
    pair: Option<&'a NewGatewayConsent<'a>>,
    now: Timestamp,
}

impl Steps for CompleteConnect<'_> {
    type Done = ConnectCompleted;

    async fn steps(&self, tx: &mut Transaction<'_>) -> StoreResult<ConnectCompleted> {
        let store = tx.store();
        // The user's caches move with the completion, whatever else it records.
        tx.declare(CacheEffect::User(self.user_id));
        let completed = sqlx::query(
            "UPDATE authorizations SET status = 'completed', failure = NULL, pkce_verifier_sealed = NULL, state_hash = NULL, updated_at = $1 \
             WHERE id = $2 AND status NOT IN ('completed', 'declined', 'failed')",
        )
        .bind(self.now)
        .bind(self.authorization_id);
        if On::Within(tx).execute(CacheEffect::Nothing, completed).await?.rows_affected() != 1 {
            return Ok(ConnectCompleted::FinishedMeanwhile);
        }
        let outcome = match self.consent {
            None => ConnectCompleted::Completed { consent_recorded: false },
            Some(new) => {
                let consent = store.consents().record(
                    new.grant_id,
                    new.user_id,
                    new.client_key,
                    new.client_name,
                    new.scopes,
                    self.now,
                );
                ConnectCompleted::Completed { consent_recorded: consent.within(tx).await? }
            }
        };
        if let Some(pair) = self.pair {
            store.gateway_consents().record(pair, self.now).within(tx).await?;
        }
        Ok(outcome)
    }

    fn applied(done: &ConnectCompleted) -> bool {
        matches!(done, ConnectCompleted::Completed { .. })
    }
}

/// [`Authorizations::approve_gateway_pair`].
pub struct ApproveGatewayPair<'a> {
    authorization_id: &'a str,
    pair: &'a NewGatewayConsent<'a>,
    now: Timestamp,
}

impl Steps for ApproveGatewayPair<'_> {
    type Done = PairOutcome;

    async fn steps(&self, tx: &mut Transaction<'_>) -> StoreResult<PairOutcome> {
        let store = tx.store();
        let completed = sqlx::query(
            "UPDATE authorizations SET status = 'completed', updated_at = $1 \
             WHERE id = $2 AND user_id = $3 AND kind = 'server' AND status = 'pending' AND expires_at > $1",
        )
        .bind(self.now)
        .bind(self.authorization_id)
        .bind(self.pair.user_id);
        if On::Within(tx).execute(CacheEffect::Nothing, completed).await?.rows_affected() != 1 {
            return Ok(PairOutcome::NotPending);
        }
        if !store.gateway_consents().record(self.pair, self.now).within(tx).await? {
            return Ok(PairOutcome::ServerGone);
        }
        Ok(PairOutcome::Approved)
    }

    fn applied(done: &PairOutcome) -> bool {
        matches!(done, PairOutcome::Approved)
    }
}

impl<'s> Authorizations<'s> {
    /// Completes a pending consent-only authorization and records its consent in one
    /// transaction: both happen, or neither (the row stays pending if the grant is gone). A
    /// service's authorization completes beside its `authorization.completed` event
    /// ([`Written::noting`]). With `pair`, the (client, server) approval the row carries is
    /// recorded with them.
    pub fn allow_client(
        self,
        new: &'s NewConsent<'s>,
        pair: Option<&'s NewGatewayConsent<'s>>,
        now: Timestamp,
    ) -> Written<'s, AllowClient<'s>> {
        Written::new(self.store, AllowClient { new, pair, now })
    }

    /// Completes a connect authorization whose tokens are stored and, with `consent`, records
    /// that the client that asked may use the grant — in one transaction, so nobody reads the
    /// row completed while the client may not use the connection yet (a waiting 2026-07-28
    /// retry would run its tool then and be asked for a consent the user already gave).
    /// [`ConnectCompleted::FinishedMeanwhile`], and nothing recorded, when the row had finished
    /// meanwhile (declined in the client). A grant gone before its consent is recorded still
    /// completes the row, as nothing of the client's can use it. With `pair`, the (client,
    /// server) approval the row carries is recorded with them (one visit approves the pair and
    /// connects).
    pub fn complete_connect(
        self,
        authorization_id: &'s str,
        user_id: &'s str,
        consent: Option<&'s NewConsent<'s>>,
        pair: Option<&'s NewGatewayConsent<'s>>,
        now: Timestamp,
    ) -> Written<'s, CompleteConnect<'s>> {
        Written::new(self.store, CompleteConnect { authorization_id, user_id, consent, pair, now })
    }

    /// Completes a pending `server` authorization and records its approval in one transaction:
    /// both happen, or neither.
    pub fn approve_gateway_pair(
        self,
        authorization_id: &'s str,
        pair: &'s NewGatewayConsent<'s>,
        now: Timestamp,
    ) -> Written<'s, ApproveGatewayPair<'s>> {
        Written::new(self.store, ApproveGatewayPair { authorization_id, pair, now })
    }
}
