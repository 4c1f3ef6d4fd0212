//! A grant and one client's consent to use it, read together (issue 11: one query per
//! decision). The consent check runs on every tool call and every token request; reading the
//! grant and then its consent was two database calls for one decision.
//!
//! The consent comes as a correlated subquery on the grants query, so the grant's own columns
//! and its conversion stay those of [`super::grants`].

use super::grants::{GRANT_COLUMNS, GrantRow, RawGrantRow};
use super::{Store, StoreError, StoreResult};
use crate::domain::Scopes;

/// A grant and the scopes one client was allowed to use it with (`None`: never allowed).
#[derive(Debug, Clone)]
pub struct GrantWithConsent {
    pub grant: GrantRow,
    pub consent_scopes: Option<Scopes>,
}

impl GrantWithConsent {
    /// The client may use the grant as it stands: its consent covers every scope the grant
    /// carries (as [`super::consents::ConsentRow::covers`]).
    pub fn allowed(&self) -> bool {
        self.consent_scopes.as_ref().is_some_and(|allowed| allowed.is_superset_of(&self.grant.scopes))
    }
}

#[derive(sqlx::FromRow)]
struct RawGrantWithConsent {
    #[sqlx(flatten)]
    grant: RawGrantRow,
    consent_scopes: Option<String>,
}

impl TryFrom<RawGrantWithConsent> for GrantWithConsent {
    type Error = StoreError;

    fn try_from(raw: RawGrantWithConsent) -> Result<Self, Self::Error> {
        let grant = GrantRow::try_from(raw.grant)?;
        let consent_scopes = raw
            .consent_scopes
            .map(|s| Scopes::from_space_separated(&s))
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("consent of grant {:?}: {e}", grant.id)))?;
        Ok(GrantWithConsent { grant, consent_scopes })
    }
}

/// The consent column; `$1` is the client key.
const CONSENT_SCOPES: &str =
    "(SELECT c.scopes FROM client_consents c WHERE c.grant_id = grants.id AND c.client_key = $1) AS consent_scopes";

impl Store {
    /// [`Store::grant`] (or [`Store::grant_for_account`] when `account` is named) with the
    /// consent of the client `client_key`.
    pub async fn grant_with_consent(
        &self,
        user_id: &str,
        provider: &str,
        account: Option<&str>,
        client_key: &str,
    ) -> StoreResult<Option<GrantWithConsent>> {
        let query = match account {
            Some(_) => format!(
                "SELECT {GRANT_COLUMNS}, {CONSENT_SCOPES} FROM grants WHERE user_id = $2 AND provider = $3 AND account_label = $4"
            ),
            None => format!(
                "SELECT {GRANT_COLUMNS}, {CONSENT_SCOPES} FROM grants WHERE user_id = $2 AND provider = $3 ORDER BY updated_at DESC, version DESC, id LIMIT 1"
            ),
        };
        let mut query = sqlx::query_as::<_, RawGrantWithConsent>(&query).bind(client_key).bind(user_id).bind(provider);
        if let Some(account) = account {
            query = query.bind(account);
        }
        query.fetch_optional(self.db()).await?.map(GrantWithConsent::try_from).transpose()
    }

    /// [`Store::grants_for_user`], each with the consent of the client `client_key`.
    pub async fn grants_with_consents(&self, user_id: &str, client_key: &str) -> StoreResult<Vec<GrantWithConsent>> {
        sqlx::query_as::<_, RawGrantWithConsent>(&format!(
            "SELECT {GRANT_COLUMNS}, {CONSENT_SCOPES} FROM grants WHERE user_id = $2 ORDER BY provider, account_label"
        ))
        .bind(client_key)
        .bind(user_id)
        .fetch_all(self.db())
        .await?
        .into_iter()
        .map(GrantWithConsent::try_from)
        .collect()
    }
}
