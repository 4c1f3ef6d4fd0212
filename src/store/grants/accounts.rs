//! Which account at a provider a grant belongs to (migration 0011): the provider's stable
//! subject (`account_id`, GitHub's numeric id) with the label shown beside it, and the API base
//! the provider returned with the token, if any (Salesforce `instance_url`).
//!
//! Grants stay keyed by `(user_id, provider, account_label)` (the name tools use); the stable
//! id finds the grant again after the provider's name for it changed, and the label follows.

use crate::store::grants::row::Grants;
use crate::store::grants::row::{GRANT_COLUMNS, GrantRow, RawGrantRow};
use crate::store::machinery::cache_effect::{FetchIn, ReturnedUser};
use crate::store::machinery::error::{StoreError, StoreResult};

impl Grants<'_> {
    /// The user's grant at `provider` for the account the provider calls `account_id`.
    pub async fn for_account_id(
        self,
        user_id: &str,
        provider: &str,
        account_id: &str,
    ) -> StoreResult<Option<GrantRow>> {
        sqlx::query_as::<_, RawGrantRow>(&format!(
            "SELECT {GRANT_COLUMNS} FROM grants WHERE user_id = $1 AND provider = $2 AND account_id = $3 AND account_id <> '' \
             ORDER BY updated_at DESC LIMIT 1"
        ))
        .bind(user_id)
        .bind(provider)
        .bind(account_id).fetch_optional_in(self.store.read())
        .await?
        .map(GrantRow::try_from)
        .transpose()
    }

    /// Gives grant `id` its new label (the account was renamed at the provider). False when
    /// another of the user's grants there already holds that label.
    pub async fn relabel(self, id: &str, label: Option<&str>) -> StoreResult<bool> {
        let relabel =
            sqlx::query_as::<_, ReturnedUser>("UPDATE grants SET account_label = $1 WHERE id = $2 RETURNING user_id")
                .bind(label.unwrap_or(""))
                .bind(id);
        match self.store.write_returning_user().fetch_optional(relabel).await {
            Ok(done) => Ok(done.is_some()),
            Err(error) => match StoreError::from_write(error) {
                StoreError::Conflict => Ok(false),
                other => Err(other),
            },
        }
    }

    /// Records the account's stable id and the grant's own API base (`None`: the provider's).
    pub async fn set_account(self, id: &str, account_id: &str, api_base_url: Option<&str>) -> StoreResult<()> {
        let record = sqlx::query_as::<_, ReturnedUser>(
            "UPDATE grants SET account_id = $1, api_base_url = $2 WHERE id = $3 RETURNING user_id",
        )
        .bind(account_id)
        .bind(api_base_url)
        .bind(id);
        self.store.write_returning_user().fetch_optional(record).await?;
        Ok(())
    }

    /// Replaces grant `id`'s API base with the one a refresh answer named (Salesforce sends
    /// `instance_url` again with each token; an org moved to another instance names the new one).
    pub async fn set_api_base(self, id: &str, api_base_url: &str) -> StoreResult<()> {
        let replace =
            sqlx::query_as::<_, ReturnedUser>("UPDATE grants SET api_base_url = $1 WHERE id = $2 RETURNING user_id")
                .bind(api_base_url)
                .bind(id);
        self.store.write_returning_user().fetch_optional(replace).await?;
        Ok(())
    }

    /// `(account_id, api_base_url)` of grant `id` ('' and `None` when the provider gave neither).
    pub async fn account(self, id: &str) -> StoreResult<Option<(String, Option<String>)>> {
        Ok(sqlx::query_as::<_, (String, Option<String>)>("SELECT account_id, api_base_url FROM grants WHERE id = $1")
            .bind(id)
            .fetch_optional_in(self.store.read())
            .await?)
    }
}
