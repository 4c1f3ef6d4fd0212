//! Reading grants: one by its key or id, a user's, everyone's. A grant with a client's consent,
//! as every tool call reads it, is [`crate::store::grants::with_consent`].

use crate::domain::OrganizationId;
use crate::store::machinery::cache_effect::FetchIn;
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::placeholders::numbered_values;

use crate::store::grants::row::GRANT_COLUMNS;
use crate::store::grants::row::GrantRow;
use crate::store::grants::row::Grants;
use crate::store::grants::row::RawGrantRow;

impl Grants<'_> {
    /// The user's grant at `provider`; with several accounts there, the most recently updated.
    /// Tools that must act on one account use [`Grants::for_account`].
    ///
    /// `within` an organization, only the grants made in it count (a service sees only its
    /// organization's); `None` reads all of the user's.
    pub async fn latest(
        self,
        user_id: &str,
        provider: &str,
        within: Option<&OrganizationId>,
    ) -> StoreResult<Option<GrantRow>> {
        let org = if within.is_some() { " AND organization_id = $3" } else { "" };
        let sql = format!(
            "SELECT {GRANT_COLUMNS} FROM grants WHERE user_id = $1 AND provider = $2{org} ORDER BY updated_at DESC, version DESC, id LIMIT 1"
        );
        let mut query = sqlx::query_as::<_, RawGrantRow>(&sql).bind(user_id).bind(provider);
        if let Some(org) = within {
            query = query.bind(org.as_str());
        }
        query.fetch_optional_in(self.store.read()).await?.map(GrantRow::try_from).transpose()
    }

    /// The grant for one account (`account` '' = the account without a name); `within` as
    /// [`Grants::latest`].
    pub async fn for_account(
        self,
        user_id: &str,
        provider: &str,
        account: &str,
        within: Option<&OrganizationId>,
    ) -> StoreResult<Option<GrantRow>> {
        let grant = sqlx::query_as::<_, RawGrantRow>(&format!(
            "SELECT {GRANT_COLUMNS} FROM grants WHERE user_id = $1 AND provider = $2 AND account_label = $3"
        ))
        .bind(user_id)
        .bind(provider)
        .bind(account)
        .fetch_optional_in(self.store.read())
        .await?
        .map(GrantRow::try_from)
        .transpose()?;
        Ok(grant.filter(|g| within.is_none_or(|org| g.organization == *org)))
    }

    pub async fn by_id(self, id: &str) -> StoreResult<Option<GrantRow>> {
        sqlx::query_as::<_, RawGrantRow>(&format!("SELECT {GRANT_COLUMNS} FROM grants WHERE id = $1"))
            .bind(id)
            .fetch_optional_in(self.store.read())
            .await?
            .map(GrantRow::try_from)
            .transpose()
    }

    /// The grants with these ids (those that exist), for a list that names them.
    pub async fn by_ids(self, ids: &[&str]) -> StoreResult<Vec<GrantRow>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!("SELECT {GRANT_COLUMNS} FROM grants WHERE id IN ({})", numbered_values(ids.len()));
        let mut query = sqlx::query_as::<_, RawGrantRow>(&sql);
        for id in ids {
            query = query.bind(*id);
        }
        query.fetch_all_in(self.store.read()).await?.into_iter().map(GrantRow::try_from).collect()
    }

    /// Every account the user holds at `provider`, by account name.
    pub async fn at(self, user_id: &str, provider: &str) -> StoreResult<Vec<GrantRow>> {
        sqlx::query_as::<_, RawGrantRow>(&format!(
            "SELECT {GRANT_COLUMNS} FROM grants WHERE user_id = $1 AND provider = $2 ORDER BY account_label"
        ))
        .bind(user_id)
        .bind(provider)
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(GrantRow::try_from)
        .collect()
    }

    pub async fn for_user(self, user_id: &str) -> StoreResult<Vec<GrantRow>> {
        sqlx::query_as::<_, RawGrantRow>(&format!(
            "SELECT {GRANT_COLUMNS} FROM grants WHERE user_id = $1 ORDER BY provider, account_label"
        ))
        .bind(user_id)
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(GrantRow::try_from)
        .collect()
    }

    pub async fn all(self) -> StoreResult<Vec<GrantRow>> {
        sqlx::query_as::<_, RawGrantRow>(&format!(
            "SELECT {GRANT_COLUMNS} FROM grants ORDER BY user_id, provider, account_label"
        ))
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(GrantRow::try_from)
        .collect()
    }
}
