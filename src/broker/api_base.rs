//! Where a grant's API calls go: a provider that names each grant's API base with its token
//! (`api_base_from_token`, Salesforce `instance_url`) has it stored on the grant (at connect
//! and again at each refresh that names one); every other provider's calls go under its
//! configured `api_base_url`. Both faces (`provider_request`, `/v1/proxy`) ask here.

use super::tokens::AccessToken;
use crate::config::ProviderConfig;
use crate::state::Core;
use crate::store::StoreError;

/// The API base `token`'s grant carries, `None` for the provider's own.
pub async fn grant_api_base(
    state: &Core,
    provider: &ProviderConfig,
    token: &AccessToken,
) -> Result<Option<url::Url>, StoreError> {
    if provider.api_base_from_token.is_none() {
        return Ok(None);
    }
    let stored = state.store.grant_account(&token.grant.id).await?;
    Ok(stored.and_then(|(_, base)| base).and_then(|base| url::Url::parse(&base).ok()))
}
