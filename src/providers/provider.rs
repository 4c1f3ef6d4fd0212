//! One provider's resolved settings: what the catalogue and the operator's `[providers.*]`
//! table make of it ([`super::catalogue::resolve`]), and what every call to that provider reads.

use std::collections::BTreeMap;
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;
use url::Url;

use crate::domain::{ProviderId, Scopes};

/// The largest `refresh_margin` accepted (globally or per provider): a longer one would
/// refresh hour-long tokens all the time.
pub const MAX_REFRESH_MARGIN: Duration = Duration::from_secs(3600);

/// How the broker authenticates to a provider's token endpoint (RFC 6749 §2.3.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenAuthMethod {
    #[default]
    ClientSecretBasic,
    ClientSecretPost,
    /// A public client: `client_id` in the body, no secret (RFC 6749 §2.3, §3.2.1).
    None,
}

/// A third-party OAuth provider the broker can connect users to.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    pub id: ProviderId,
    pub display_name: String,
    pub authorization_url: Url,
    pub token_url: Url,
    pub client_id: String,
    pub client_secret: Option<SecretString>,
    /// Asked for when a tool names no scopes.
    pub default_scopes: Scopes,
    /// `provider_request` paths are resolved under this URL and cannot leave it.
    pub api_base_url: Url,
    pub revocation_url: Option<Url>,
    pub userinfo_url: Option<Url>,
    pub token_auth_method: TokenAuthMethod,
    pub extra_authorize_params: BTreeMap<String, String>,
    /// RFC 9207: when set, the callback must carry `iss` equal to this.
    pub issuer: Option<String>,
    /// What each scope allows, in a person's words (`scope = "description"`): shown beside the
    /// scope on the consent pages. Scopes without one are shown bare. With `default_scopes`
    /// these are the scopes the provider offers (`available_scopes`): any other is refused
    /// before the provider sees it, unless `open_scopes`.
    pub scope_descriptions: BTreeMap<String, String>,
    /// Where refreshes go when not to `token_url` (Figma).
    pub refresh_url: Option<Url>,
    /// How scopes are joined in the authorization request: `" "` (RFC 6749 §3.3) or `","`.
    pub scope_separator: String,
    /// The authorization parameter carrying the scopes (`scope`; Slack user tokens: `user_scope`).
    pub scope_param: String,
    /// The provider refuses an authorization without PKCE (S256 is sent either way).
    pub pkce_required: bool,
    /// The operator lets any well-formed scope through (`open_scopes = true`).
    pub open_scopes: bool,
    /// A scope as the token answer spells it → as we ask for it (Google's URLs for `email`).
    pub scope_aliases: BTreeMap<String, String>,
    /// Scopes granted but never echoed in the token answer (Microsoft's `offline_access`).
    pub scopes_not_returned: Scopes,
    /// Dot path to the account's stable id in the userinfo answer (or the token answer when
    /// there is no `userinfo_url`).
    pub account_id_field: Option<String>,
    /// Dot path to the account's display label, beside the id.
    pub account_label_field: Option<String>,
    /// Dot path to a nested token in the token answer (Slack v2: `authed_user`).
    pub token_path: Option<String>,
    /// A field of the token answer holding this grant's API base (Salesforce `instance_url`).
    pub api_base_from_token: Option<String>,
    /// Domains a returned API base must be under.
    pub api_base_domains: Vec<String>,
    /// `User-Agent` for this provider's token, identity and API calls (Reddit wants its own).
    pub user_agent: Option<String>,
    /// Headers sent with every API call besides the token (Twitch `Client-Id`, Notion
    /// `Notion-Version`), `{client_id}` filled; names and values checked at start-up.
    pub api_headers: Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
    /// This provider's `refresh_margin` when it differs from the global one.
    pub refresh_margin: Option<Duration>,
    /// The catalogue entry this provider was built from, if any.
    pub catalogue: Option<String>,
    /// Set for a provider whose users enter an API key instead of going through OAuth
    /// (`kind = "api_key"`): how the key is sent and checked.
    pub api_key: Option<super::api_key::ApiKeySpec>,
    /// Whether an organization without its own app here may connect with this (the
    /// operator's) app (`shared_with_organizations`, default true). The default organization
    /// always may: it is the operator's own.
    pub shared_with_organizations: bool,
    /// The table this was built from (catalogue entry and the operator's fields, no secret):
    /// what an organization's own app is built over, with its client and template values
    /// (`catalogue::with_app`). `None` for entries the broker makes itself.
    pub source: Option<std::sync::Arc<super::fields::ProviderFields>>,
}

impl ProviderConfig {
    /// `builder` with this provider's credential: the key as its entry says for an API-key
    /// provider, else the access token as a bearer (RFC 6750 §2.1).
    pub fn with_credential(&self, builder: reqwest::RequestBuilder, token: &SecretString) -> reqwest::RequestBuilder {
        match &self.api_key {
            Some(spec) => spec.apply(builder, token),
            None => builder.bearer_auth(secrecy::ExposeSecret::expose_secret(token)),
        }
    }

    /// Whether users connect by entering a key (no OAuth flow, no refresh).
    pub fn is_api_key(&self) -> bool {
        self.api_key.is_some()
    }

    /// What `scope` allows, if this provider's configuration says.
    pub fn scope_description(&self, scope: &str) -> Option<&str> {
        self.scope_descriptions.get(scope).map(String::as_str).map(str::trim).filter(|d| !d.is_empty())
    }
}
