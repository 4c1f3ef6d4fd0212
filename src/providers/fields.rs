//! One provider as the catalogue or the operator describes it ([`ProviderFields`]): every field
//! optional, overlaid (the operator's over the catalogue's) and then built into a
//! [`super::provider::ProviderConfig`] by [`super::catalogue`], which keeps the table it built
//! from so an organization's own app can be built over it.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The template values a URL may hold, filled from the operator's table.
pub const TEMPLATE_NAMES: [&str; 5] = ["tenant", "domain", "subdomain", "shop", "base_url"];

/// One provider as the catalogue or the operator describes it: every field optional, so an
/// operator's table can be credentials alone and overlay any field.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderFields {
    /// Operator only: the catalogue entry to start from [default: the table's id].
    pub catalogue: Option<String>,
    pub display_name: Option<String>,
    pub authorization_url: Option<String>,
    pub token_url: Option<String>,
    pub refresh_url: Option<String>,
    pub revocation_url: Option<String>,
    pub userinfo_url: Option<String>,
    pub api_base_url: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub client_secret_env: Option<String>,
    /// Default scopes.
    pub scopes: Option<Vec<String>>,
    /// Catalogue only: scopes the provider needs to work with the broker (`openid` for the
    /// identity lookup, `offline_access` for a refresh token), added to whatever a connect
    /// asks for; the defaults are asked for only when nothing is named.
    pub required_scopes: Option<Vec<String>>,
    pub scope_separator: Option<String>,
    pub scope_param: Option<String>,
    pub token_auth_method: Option<String>,
    pub pkce: Option<String>,
    pub extra_authorize_params: Option<BTreeMap<String, String>>,
    pub issuer: Option<String>,
    #[serde(alias = "scope_descriptions")]
    pub available_scopes: Option<BTreeMap<String, String>>,
    pub open_scopes: Option<bool>,
    pub scope_aliases: Option<BTreeMap<String, String>>,
    pub scopes_not_returned: Option<Vec<String>>,
    pub account_id_field: Option<String>,
    pub account_label_field: Option<String>,
    pub token_path: Option<String>,
    pub api_base_from_token: Option<String>,
    pub api_base_domains: Option<Vec<String>>,
    pub user_agent: Option<String>,
    /// Headers for every API call (`{client_id}` is filled): Twitch `Client-Id`, Notion
    /// `Notion-Version`.
    pub api_headers: Option<BTreeMap<String, String>>,
    /// How long before expiry this provider's tokens are refreshed (`"2m"`), over the global
    /// `refresh_margin`.
    pub refresh_margin: Option<String>,
    pub notes: Option<String>,
    pub tenant: Option<String>,
    pub domain: Option<String>,
    pub subdomain: Option<String>,
    pub shop: Option<String>,
    pub base_url: Option<String>,
    /// `oauth2` (the default) or `api_key`: the user enters a key on the broker's page
    /// ([`super::api_key`]); the fields below are for `api_key` only.
    pub kind: Option<String>,
    /// The header carrying the key [default: Authorization].
    pub key_header: Option<String>,
    /// A word before the key in that header (`Bearer`, `token`).
    pub key_scheme: Option<String>,
    /// HTTP Basic instead of a header: the key as the `username` or the `password`.
    pub key_basic: Option<String>,
    /// With `key_basic = "password"`: the user name sent with it.
    pub key_basic_user: Option<String>,
    /// Where the user creates a key.
    pub key_url: Option<String>,
    /// How the provider's keys begin, a hint only.
    pub key_prefixes: Option<Vec<String>>,
    /// A test request under the API base, `"GET user"`.
    pub validate: Option<String>,
    /// The statuses of the test request that mean the key is good [default: any 2xx].
    pub validate_statuses: Option<Vec<u16>>,
    /// Operator only: whether organizations without their own app may use this one
    /// [default: true].
    pub shared_with_organizations: Option<bool>,
}

macro_rules! overlay {
    ($base:ident, $over:ident, $($field:ident),+) => {
        ProviderFields { $($field: $over.$field.or($base.$field)),+ }
    };
}

impl ProviderFields {
    /// `self` with every field `over` gives replaced.
    pub(super) fn overlay(self, over: ProviderFields) -> ProviderFields {
        let base = self;
        overlay!(
            base,
            over,
            catalogue,
            display_name,
            authorization_url,
            token_url,
            refresh_url,
            revocation_url,
            userinfo_url,
            api_base_url,
            client_id,
            client_secret,
            client_secret_env,
            scopes,
            required_scopes,
            scope_separator,
            scope_param,
            token_auth_method,
            pkce,
            extra_authorize_params,
            issuer,
            available_scopes,
            open_scopes,
            scope_aliases,
            scopes_not_returned,
            account_id_field,
            account_label_field,
            token_path,
            api_base_from_token,
            api_base_domains,
            user_agent,
            api_headers,
            refresh_margin,
            notes,
            tenant,
            domain,
            subdomain,
            shop,
            base_url,
            kind,
            key_header,
            key_scheme,
            key_basic,
            key_basic_user,
            key_url,
            key_prefixes,
            validate,
            validate_statuses,
            shared_with_organizations
        )
    }

    /// The template names this entry's URLs use.
    pub fn templates(&self) -> Vec<&'static str> {
        let urls = [
            &self.authorization_url,
            &self.token_url,
            &self.refresh_url,
            &self.revocation_url,
            &self.userinfo_url,
            &self.api_base_url,
        ];
        TEMPLATE_NAMES
            .into_iter()
            .filter(|name| {
                let placeholder = format!("{{{name}}}");
                urls.iter().any(|url| url.as_deref().is_some_and(|u| u.contains(&placeholder)))
            })
            .collect()
    }

    pub(super) fn template_value(&self, name: &str) -> Option<&str> {
        match name {
            "tenant" => self.tenant.as_deref(),
            "domain" => self.domain.as_deref(),
            "subdomain" => self.subdomain.as_deref(),
            "shop" => self.shop.as_deref(),
            "base_url" => self.base_url.as_deref(),
            _ => None,
        }
    }
}
