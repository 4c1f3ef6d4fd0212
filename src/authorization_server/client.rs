//! An MCP client as the authorization server knows it: registered through RFC 7591 (stored in
//! [`crate::store::authorization_server`]) or identified by a client ID metadata document (its
//! `client_id` is an https URL, fetched on demand by [`super::client_metadata_document`]; [`super::lookup`] finds either).
//!
//! Both carry RFC 7591 §2 client metadata, checked here by one function so the same rules hold
//! for either: exact redirect URIs ([`super::redirect_uri`]), `response_types` ⊆ {code},
//! `grant_types` ⊆ {authorization_code, refresh_token}, a known token endpoint auth method, a
//! short printable `client_name` and supported scopes.

use serde::Deserialize;

use super::{redirect_uri, scopes};
use crate::config::Config;
use crate::domain::Scopes;
use crate::state::AppState;
use crate::store::StoreError;
use crate::store::authorization_server::OAuthClientRow;
pub use crate::token_endpoint::presented_client::AuthMethod;

/// Longer names are refused (they are shown on the consent page).
pub const MAX_CLIENT_NAME_CHARS: usize = 100;

/// Where the client's metadata came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientSource {
    /// `POST /register`: the name is whatever the registrant typed.
    Registered,
    /// A document served at the `client_id` URL: the name is vouched for by that host.
    MetadataDocument,
}

#[derive(Clone)]
pub struct Client {
    pub client_id: String,
    pub client_name: Option<String>,
    /// Exact strings; `/authorize` compares with `==`.
    pub redirect_uris: Vec<String>,
    /// The client registered the `refresh_token` grant.
    pub refresh_allowed: bool,
    /// Limits what the client may ask for.
    pub scope: Option<Scopes>,
    pub auth_method: AuthMethod,
    /// `sha256_hex` of a confidential client's secret.
    pub secret_hash: Option<String>,
    pub source: ClientSource,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("client_id", &self.client_id)
            .field("client_name", &self.client_name)
            .field("auth_method", &self.auth_method)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Client {
    fn from_row(row: OAuthClientRow) -> Self {
        Self {
            refresh_allowed: row.refresh_allowed,
            client_id: row.client_id,
            client_name: row.client_name,
            redirect_uris: row.redirect_uris,
            scope: row.scope,
            auth_method: row.token_endpoint_auth_method,
            secret_hash: row.client_secret_hash,
            source: ClientSource::Registered,
        }
    }

    /// The registered client with this id, if any.
    pub async fn registered(state: &AppState, client_id: &str) -> Result<Option<Self>, StoreError> {
        Ok(state.core.store.oauth_clients().by_id(client_id).await?.map(Self::from_row))
    }
}

/// RFC 7591 §2 client metadata as sent to `/register` or served as a metadata document.
/// Unknown members are ignored (RFC 7591 §2); wrong types fail the whole document.
#[derive(Debug, Default, Deserialize)]
pub struct ClientMetadataInput {
    pub redirect_uris: Option<Vec<String>>,
    pub token_endpoint_auth_method: Option<String>,
    pub grant_types: Option<Vec<String>>,
    pub response_types: Option<Vec<String>>,
    pub client_name: Option<String>,
    pub scope: Option<String>,
    /// Metadata documents only: must equal the URL the document was fetched from.
    pub client_id: Option<String>,
    /// Metadata documents must not carry a shared secret (SEP-991).
    pub client_secret: Option<serde_json::Value>,
}

/// Which rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataContext {
    /// RFC 7591 registration: `token_endpoint_auth_method` defaults to `client_secret_basic`.
    Registration,
    /// A client ID metadata document: public clients only, `client_name` required.
    Document,
}

/// RFC 7591 §3.2.2 error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataError {
    InvalidRedirectUri(&'static str),
    InvalidClientMetadata(&'static str),
}

impl MetadataError {
    pub fn code(self) -> &'static str {
        match self {
            Self::InvalidRedirectUri(_) => "invalid_redirect_uri",
            Self::InvalidClientMetadata(_) => "invalid_client_metadata",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Self::InvalidRedirectUri(d) | Self::InvalidClientMetadata(d) => d,
        }
    }
}

/// Metadata that passed every rule, normalised (defaults filled in, duplicates removed).
#[derive(Debug, Clone)]
pub struct ValidatedMetadata {
    pub redirect_uris: Vec<String>,
    pub auth_method: AuthMethod,
    /// Ordered: `authorization_code` first.
    pub grant_types: Vec<&'static str>,
    pub client_name: Option<String>,
    pub scope: Option<Scopes>,
}

impl ValidatedMetadata {
    pub fn refresh_allowed(&self) -> bool {
        self.grant_types.contains(&"refresh_token")
    }
}

pub fn validate_metadata(
    input: &ClientMetadataInput,
    config: &Config,
    context: MetadataContext,
) -> Result<ValidatedMetadata, MetadataError> {
    use MetadataError::{InvalidClientMetadata as Invalid, InvalidRedirectUri as BadUri};
    let uris = input.redirect_uris.as_deref().unwrap_or_default();
    if uris.is_empty() {
        return Err(BadUri("redirect_uris is required"));
    }
    if uris.len() > redirect_uri::MAX_REDIRECT_URIS {
        return Err(BadUri("at most 10 redirect_uris are accepted"));
    }
    let mut redirect_uris: Vec<String> = Vec::with_capacity(uris.len());
    for uri in uris {
        redirect_uri::validate(uri).map_err(BadUri)?;
        if !redirect_uris.contains(uri) {
            redirect_uris.push(uri.clone());
        }
    }
    if let Some(types) = &input.response_types
        && types.iter().any(|t| t != "code")
    {
        return Err(Invalid("only the response type \"code\" is supported"));
    }
    let requested_grants = input.grant_types.clone().unwrap_or_else(|| vec!["authorization_code".into()]);
    let mut grant_types = Vec::new();
    for grant in ["authorization_code", "refresh_token"] {
        if requested_grants.iter().any(|g| g == grant) {
            grant_types.push(grant);
        }
    }
    if requested_grants.iter().any(|g| g != "authorization_code" && g != "refresh_token") {
        return Err(Invalid("only the authorization_code and refresh_token grant types are supported"));
    }
    if !grant_types.contains(&"authorization_code") {
        // RFC 7591 §2.1: response type "code" goes with the authorization_code grant.
        return Err(Invalid("grant_types must include authorization_code"));
    }
    let auth_method = match (context, input.token_endpoint_auth_method.as_deref()) {
        (MetadataContext::Registration, None) => AuthMethod::ClientSecretBasic,
        (MetadataContext::Document, None | Some("none")) => AuthMethod::None,
        (MetadataContext::Document, Some(_)) => {
            return Err(Invalid("metadata-document clients must use token_endpoint_auth_method \"none\""));
        }
        (MetadataContext::Registration, Some(method)) => AuthMethod::parse(method)
            .ok_or(Invalid("token_endpoint_auth_method must be none, client_secret_basic or client_secret_post"))?,
    };
    if context == MetadataContext::Document && input.client_secret.is_some() {
        return Err(Invalid("a client metadata document must not contain a client_secret"));
    }
    let client_name = match input.client_name.as_deref().map(str::trim) {
        None | Some("") if context == MetadataContext::Document => {
            return Err(Invalid("client_name is required in a client metadata document"));
        }
        None | Some("") => None,
        Some(name) if name.chars().count() > MAX_CLIENT_NAME_CHARS => {
            return Err(Invalid("client_name is longer than 100 characters"));
        }
        Some(name) if name.chars().any(char::is_control) => {
            return Err(Invalid("client_name contains control characters"));
        }
        Some(name) => Some(name.to_owned()),
    };
    let scope = match input.scope.as_deref() {
        None => None,
        Some(value) => {
            let unsupported = Invalid("scope names a scope this server does not support");
            let set = scopes::parse_list(value, &scopes::supported(config)).map_err(|_| unsupported)?;
            Some(Scopes::parse(&set).map_err(|_| unsupported)?)
        }
    };
    Ok(ValidatedMetadata { redirect_uris, auth_method, grant_types, client_name, scope })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SettingsArgs;

    fn config() -> Config {
        Config::from_toml(&SettingsArgs::default(), "[identity]\nscopes_supported = [\"mcp\"]\n").unwrap()
    }

    fn input(json: serde_json::Value) -> ClientMetadataInput {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn registration_defaults_follow_rfc_7591() {
        let m = validate_metadata(
            &input(serde_json::json!({"redirect_uris": ["http://127.0.0.1:5/cb", "http://127.0.0.1:5/cb"]})),
            &config(),
            MetadataContext::Registration,
        )
        .unwrap();
        assert_eq!(m.redirect_uris, ["http://127.0.0.1:5/cb"]);
        assert_eq!(m.auth_method, AuthMethod::ClientSecretBasic);
        assert_eq!(m.grant_types, ["authorization_code"]);
        assert!(!m.refresh_allowed());
        assert_eq!(m.client_name, None);
    }

    #[test]
    fn bad_metadata_gets_the_rfc_7591_error_code() {
        let cases = [
            (serde_json::json!({}), "invalid_redirect_uri"),
            (serde_json::json!({"redirect_uris": ["http://evil.example/cb"]}), "invalid_redirect_uri"),
            (serde_json::json!({"redirect_uris": ["https://a.example/cb#x"]}), "invalid_redirect_uri"),
            (
                serde_json::json!({"redirect_uris": ["https://a.example/cb"], "grant_types": ["implicit"]}),
                "invalid_client_metadata",
            ),
            (
                serde_json::json!({"redirect_uris": ["https://a.example/cb"], "grant_types": ["refresh_token"]}),
                "invalid_client_metadata",
            ),
            (
                serde_json::json!({"redirect_uris": ["https://a.example/cb"], "response_types": ["token"]}),
                "invalid_client_metadata",
            ),
            (
                serde_json::json!({"redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "private_key_jwt"}),
                "invalid_client_metadata",
            ),
            (
                serde_json::json!({"redirect_uris": ["https://a.example/cb"], "client_name": "x".repeat(101)}),
                "invalid_client_metadata",
            ),
            (
                serde_json::json!({"redirect_uris": ["https://a.example/cb"], "client_name": "a\u{7}b"}),
                "invalid_client_metadata",
            ),
            (
                serde_json::json!({"redirect_uris": ["https://a.example/cb"], "scope": "admin"}),
                "invalid_client_metadata",
            ),
        ];
        for (json, code) in cases {
            let error = validate_metadata(&input(json.clone()), &config(), MetadataContext::Registration).unwrap_err();
            assert_eq!(error.code(), code, "{json}");
        }
    }

    #[test]
    fn documents_must_be_public_and_named() {
        let ok = serde_json::json!({"redirect_uris": ["https://a.example/cb"], "client_name": "Tool"});
        let m = validate_metadata(&input(ok), &config(), MetadataContext::Document).unwrap();
        assert_eq!(m.auth_method, AuthMethod::None);
        for bad in [
            serde_json::json!({"redirect_uris": ["https://a.example/cb"]}),
            serde_json::json!({"redirect_uris": ["https://a.example/cb"], "client_name": "T", "token_endpoint_auth_method": "client_secret_basic"}),
            serde_json::json!({"redirect_uris": ["https://a.example/cb"], "client_name": "T", "client_secret": "s"}),
        ] {
            assert!(validate_metadata(&input(bad.clone()), &config(), MetadataContext::Document).is_err(), "{bad}");
        }
    }
}
