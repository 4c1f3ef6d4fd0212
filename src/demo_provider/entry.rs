//! How the broker sees its own demo provider: one provider entry like any configured one, so
//! the flow, the refresh and the API calls go through the same code as for a real provider.

use std::collections::BTreeMap;

use secrecy::SecretString;

use crate::config::{Config, ProviderConfig, TokenAuthMethod};
use crate::domain::demo_scopes::DemoScope;
use crate::domain::{ProviderId, Scopes};

/// The one client the demo provider knows: the broker.
pub const CLIENT_ID: &str = "oauth-broker-demo";

/// What every connect with the demo provider asks for: its `/api/me`, where the broker reads
/// the account, needs `profile`.
pub fn required_scopes() -> Scopes {
    Scopes::parse(["profile"]).unwrap_or_default()
}

/// The broker's entry for its own demo provider, at `{public_url}/demo-provider/…`, with the
/// client secret the provider checks.
pub fn provider_entry(config: &Config, secret: SecretString) -> ProviderConfig {
    let id = ProviderId::demo();
    let mut api_base_url = config.url("/demo-provider/api/");
    if !api_base_url.path().ends_with('/') {
        api_base_url.set_path(&format!("{}/", api_base_url.path()));
    }
    ProviderConfig {
        id,
        display_name: "Demo Provider".into(),
        authorization_url: config.url("/demo-provider/authorize"),
        token_url: config.url("/demo-provider/token"),
        client_id: CLIENT_ID.into(),
        client_secret: Some(secret),
        default_scopes: Scopes::parse(["profile", "notes:read"]).unwrap_or_default(),
        api_base_url,
        revocation_url: Some(config.url("/demo-provider/revoke")),
        userinfo_url: Some(config.url("/demo-provider/api/me")),
        token_auth_method: TokenAuthMethod::ClientSecretBasic,
        extra_authorize_params: BTreeMap::new(),
        issuer: Some(config.url("/demo-provider").to_string()),
        // The demo provider's own authorize page uses the same words.
        scope_descriptions: DemoScope::ALL
            .into_iter()
            .map(|scope| (scope.as_str().to_owned(), scope.describe().to_owned()))
            .collect(),
        refresh_url: None,
        scope_separator: " ".into(),
        scope_param: "scope".into(),
        pkce_required: true,
        open_scopes: false,
        scope_aliases: BTreeMap::new(),
        scopes_not_returned: Scopes::default(),
        account_id_field: Some("account".into()),
        account_label_field: Some("account".into()),
        token_path: None,
        api_base_from_token: None,
        api_base_domains: Vec::new(),
        user_agent: None,
        api_headers: Vec::new(),
        refresh_margin: None,
        catalogue: None,
        api_key: None,
        shared_with_organizations: true,
        source: None,
    }
}

/// The demo provider's API-key mode as the broker sees it: provider `demo-key`, whose users
/// paste a key from the demo provider's keys page (`/demo-provider/keys`). The key goes in
/// `X-Demo-Key`, is checked with `GET me` (which also names the account), and opens the same
/// API as an access token.
pub fn api_key_entry(config: &Config) -> Result<ProviderConfig, crate::providers::catalogue::ProviderConfigError> {
    let id = ProviderId::parse(API_KEY_PROVIDER_ID).unwrap_or_else(|_| ProviderId::demo());
    let fields = crate::providers::catalogue::ProviderFields {
        kind: Some("api_key".into()),
        display_name: Some("Demo Provider (API key)".into()),
        api_base_url: Some(config.url("/demo-provider/api/").to_string()),
        key_header: Some(KEY_HEADER.into()),
        validate: Some("GET me".into()),
        account_id_field: Some("account".into()),
        account_label_field: Some("account".into()),
        key_url: Some(config.url("/demo-provider/keys").to_string()),
        key_prefixes: Some(vec![KEY_PREFIX.into()]),
        ..Default::default()
    };
    crate::providers::catalogue::resolve(&id, fields)
}

/// The header the demo API reads a key from ([`super::keys`]).
pub const KEY_HEADER: &str = "x-demo-key";
/// How every demo key begins.
pub const KEY_PREFIX: &str = "demo_sk_";

/// The id of the demo provider's API-key mode.
pub const API_KEY_PROVIDER_ID: &str = "demo-key";
