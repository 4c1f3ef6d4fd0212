//! A grant and one client's consent to use it, read together (one query per
//! decision). The consent check runs on every tool call and every token request; reading the
//! grant and then its consent was two database calls for one decision.
//!
//! The consent comes as a correlated subquery on the grants query, so the grant's own columns
//! and its conversion stay those of [`crate::store::grants`].

use crate::domain::{OrganizationId, Scopes};
use crate::store::grants::row::{GRANT_COLUMNS, GrantRow, Grants, RawGrantRow};
use crate::store::machinery::cache_effect::FetchIn;
use crate::store::machinery::error::{StoreError, StoreResult};

/// A grant and the scopes one client was allowed to use it with (`None`: never allowed).
#[derive(Debug, Clone)]
pub struct GrantWithConsent {
    pub grant: GrantRow,
    pub consent_scopes: Option<Scopes>,
}

impl GrantWithConsent {
    /// The client may use the grant as it stands: its consent covers every scope the grant
    /// carries (as [`crate::store::grants::consents::ConsentRow::covers`]).
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

impl Grants<'_> {
    /// [`Grants::latest`] (or [`Grants::for_account`] when `account` is named) with the
    /// consent of the client `client_key`: picked from the user's cached grants
    /// ([`crate::store::grants::cache`]) when they are fresh.
    ///
    /// `within` an organization, the grants made in another one are not there (a service sees
    /// only its organization's); `None` reads all of the user's (their own MCP client).
    pub async fn with_consent(
        self,
        user_id: &str,
        provider: &str,
        account: Option<&str>,
        client_key: &str,
        within: Option<&OrganizationId>,
    ) -> StoreResult<Option<GrantWithConsent>> {
        // An empty account name matches the column's '' (read back as no name): asked as is.
        if account != Some("")
            && let Ok(all) = self.for_user_seen_by(user_id, client_key).await
        {
            let mut at_provider = all
                .iter()
                .filter(|r| r.grant.provider == provider && within.is_none_or(|org| r.grant.organization == *org));
            let picked = match account {
                Some(account) => at_provider.find(|r| r.grant.account_label.as_deref() == Some(account)),
                // As `ORDER BY updated_at DESC, version DESC, id LIMIT 1`.
                None => at_provider.min_by(|a, b| {
                    (b.grant.updated_at, b.grant.version)
                        .cmp(&(a.grant.updated_at, a.grant.version))
                        .then_with(|| a.grant.id.cmp(&b.grant.id))
                }),
            };
            return Ok(picked.cloned());
        }
        self.read_grant_with_consent(user_id, provider, account, client_key, within).await
    }

    /// The user's grants at `provider`, by account name, as [`Grants::at`], from the
    /// cached read of the client `client_key` when fresh.
    /// `within` as [`Grants::with_consent`].
    pub async fn at_seen_by(
        self,
        user_id: &str,
        provider: &str,
        client_key: &str,
        within: Option<&OrganizationId>,
    ) -> StoreResult<Vec<GrantRow>> {
        let there = |g: &GrantRow| g.provider == provider && within.is_none_or(|org| g.organization == *org);
        match self.for_user_seen_by(user_id, client_key).await {
            Ok(all) => Ok(all.iter().map(|r| &r.grant).filter(|g| there(g)).cloned().collect()),
            // One corrupt row elsewhere must not hide this provider's grants.
            Err(_) => Ok(self.at(user_id, provider).await?.into_iter().filter(there).collect()),
        }
    }

    /// [`Grants::with_consent`], always from the database.
    async fn read_grant_with_consent(
        self,
        user_id: &str,
        provider: &str,
        account: Option<&str>,
        client_key: &str,
        within: Option<&OrganizationId>,
    ) -> StoreResult<Option<GrantWithConsent>> {
        let (org, next) = match within {
            Some(_) => (" AND organization_id = $4", 5),
            None => ("", 4),
        };
        let query = match account {
            Some(_) => format!(
                "SELECT {GRANT_COLUMNS}, {CONSENT_SCOPES} FROM grants WHERE user_id = $2 AND provider = $3{org} AND account_label = ${next}"
            ),
            None => format!(
                "SELECT {GRANT_COLUMNS}, {CONSENT_SCOPES} FROM grants WHERE user_id = $2 AND provider = $3{org} ORDER BY updated_at DESC, version DESC, id LIMIT 1"
            ),
        };
        let mut query = sqlx::query_as::<_, RawGrantWithConsent>(&query).bind(client_key).bind(user_id).bind(provider);
        if let Some(org) = within {
            query = query.bind(org.as_str());
        }
        if let Some(account) = account {
            query = query.bind(account);
        }
        query.fetch_optional_in(self.store.read()).await?.map(GrantWithConsent::try_from).transpose()
    }

    /// [`Grants::for_user`], each with the consent of the client `client_key`, from the
    /// database ([`Grants::for_user_seen_by`] is the cached read).
    pub async fn for_user_with_consents(self, user_id: &str, client_key: &str) -> StoreResult<Vec<GrantWithConsent>> {
        sqlx::query_as::<_, RawGrantWithConsent>(&format!(
            "SELECT {GRANT_COLUMNS}, {CONSENT_SCOPES} FROM grants WHERE user_id = $2 ORDER BY provider, account_label"
        ))
        .bind(client_key)
        .bind(user_id)
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(GrantWithConsent::try_from)
        .collect()
    }
}
