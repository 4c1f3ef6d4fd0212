//! The providers users can connect, keyed by id.

use std::collections::BTreeMap;

use secrecy::SecretString;

use crate::config::{Config, ProviderConfig, TokenAuthMethod};
use crate::demo_provider::scopes::DemoScope;
use crate::domain::{ProviderId, Scopes};

#[derive(Debug, Default)]
pub struct Providers {
    by_id: BTreeMap<ProviderId, ProviderConfig>,
}

/// The demo provider's id; served by the broker itself under `/demo-provider/`.
pub const DEMO_PROVIDER_ID: &str = "demo";
pub const DEMO_CLIENT_ID: &str = "oauth-broker-demo";

impl Providers {
    /// Configured providers, plus `demo` (pointing at our own `/demo-provider/…`) when enabled.
    pub fn from_config(config: &Config, demo_client_secret: Option<&SecretString>) -> Self {
        let mut by_id = config.providers.clone();
        if let Some(secret) = demo_client_secret {
            let id = ProviderId::demo();
            by_id.insert(id.clone(), demo_provider_config(config, id, secret.clone()));
        }
        Self { by_id }
    }

    pub fn get(&self, id: &ProviderId) -> Option<&ProviderConfig> {
        self.by_id.get(id)
    }

    /// Looks a provider up by the id a client typed.
    pub fn find(&self, id: &str) -> Option<&ProviderConfig> {
        ProviderId::parse(id).ok().and_then(|id| self.by_id.get(&id).map(|p| p as _))
    }

    pub fn iter(&self) -> impl Iterator<Item = &ProviderConfig> {
        self.by_id.values()
    }

    pub fn ids(&self) -> Vec<String> {
        self.by_id.keys().map(ToString::to_string).collect()
    }
}

fn demo_provider_config(config: &Config, id: ProviderId, secret: SecretString) -> ProviderConfig {
    let mut api_base_url = config.url("/demo-provider/api/");
    if !api_base_url.path().ends_with('/') {
        api_base_url.set_path(&format!("{}/", api_base_url.path()));
    }
    ProviderConfig {
        id,
        display_name: "Demo Provider".into(),
        authorization_url: config.url("/demo-provider/authorize"),
        token_url: config.url("/demo-provider/token"),
        client_id: DEMO_CLIENT_ID.into(),
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
    }
}
