//! The compiled-in provider catalogue (`catalogue.toml`) and the operator's `[providers.*]`
//! tables over it.
//!
//! ```text
//! catalogue.toml [github] ──┐ overlay: every field the operator gives wins
//! config [providers.github] ┴─▶ fill {tenant} {domain} {subdomain} {shop} {base_url}
//!                              ─▶ check (https, auth method, PKCE, scopes, reserved params)
//!                              ─▶ ProviderConfig, or an error naming the provider and the field
//! ```
//!
//! A table whose id is not in the catalogue is a provider described entirely by the operator
//! (as before the catalogue); `catalogue = "gitlab"` enables an entry under another id (two
//! GitLab servers). Credentials never come from the catalogue.

use std::collections::BTreeMap;

use secrecy::SecretString;
use url::Url;

use super::provider::{MAX_REFRESH_MARGIN, ProviderConfig, TokenAuthMethod};
use crate::domain::{ProviderId, Scopes};
use crate::net::is_loopback;

/// The catalogue's text, compiled in.
pub const CATALOGUE_TOML: &str = include_str!("catalogue.toml");

/// Authorization parameters the broker sets itself; an entry may not override them.
const RESERVED_AUTHORIZE_PARAMS: [&str; 7] =
    ["response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method", "scope"];

pub use super::fields::{ProviderFields, TEMPLATE_NAMES};

/// An inconsistent provider: start-up stops with this message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("[providers.{provider}] {field}: {message}")]
pub struct ProviderConfigError {
    pub provider: String,
    pub field: String,
    pub message: String,
}

/// The catalogue, parsed. Its own tests check every entry; a broken catalogue is a build
/// mistake, reported like any configuration error.
pub fn builtin() -> Result<BTreeMap<String, ProviderFields>, ProviderConfigError> {
    toml::from_str(CATALOGUE_TOML).map_err(|e| ProviderConfigError {
        provider: "*".into(),
        field: "catalogue".into(),
        message: e.to_string(),
    })
}

/// What catalogue entry `entry` marks as required (`required_scopes`): added to every connect
/// with that provider, whatever it names. Empty for an unknown entry.
pub fn required_scopes(entry: &str) -> Scopes {
    static REQUIRED: std::sync::OnceLock<BTreeMap<String, Scopes>> = std::sync::OnceLock::new();
    REQUIRED
        .get_or_init(|| {
            builtin()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(name, fields)| {
                    let scopes = Scopes::parse(fields.required_scopes.unwrap_or_default()).ok()?;
                    Some((name, scopes))
                })
                .collect()
        })
        .get(entry)
        .cloned()
        .unwrap_or_default()
}

/// The operator's table for `id` over its catalogue entry, filled and checked.
pub fn resolve(id: &ProviderId, table: ProviderFields) -> Result<ProviderConfig, ProviderConfigError> {
    let catalogue = builtin()?;
    let err = |field: &str, message: String| ProviderConfigError {
        provider: id.to_string(),
        field: field.to_owned(),
        message,
    };
    let base = match &table.catalogue {
        Some(name) => catalogue.get(name).cloned().ok_or_else(|| {
            err("catalogue", format!("no catalogue entry {name:?} (see `oauth-broker providers list`)"))
        })?,
        None => catalogue.get(id.as_str()).cloned().unwrap_or_default(),
    };
    for secret in [&base.client_secret, &base.client_secret_env] {
        if secret.is_some() {
            return Err(err("client_secret", "the catalogue never holds credentials".into()));
        }
    }
    if base.shared_with_organizations.is_some() {
        return Err(err("shared_with_organizations", "the operator decides it, never the catalogue".into()));
    }
    if table.required_scopes.is_some() {
        return Err(err(
            "required_scopes",
            "comes from the catalogue only (what the provider needs to work); name the scopes to ask for in `scopes`"
                .into(),
        ));
    }
    let from_catalogue =
        table.catalogue.clone().or_else(|| catalogue.contains_key(id.as_str()).then(|| id.to_string()));
    let fields = base.overlay(table);
    build(id, fields, from_catalogue).map_err(|(field, message)| err(&field, message))
}

type FieldError = (String, String);

fn missing(field: &str) -> FieldError {
    (field.to_owned(), "missing".into())
}

fn build(id: &ProviderId, f: ProviderFields, catalogue: Option<String>) -> Result<ProviderConfig, FieldError> {
    let vars = template_values(&f)?;
    let url = |field: &str, value: &Option<String>| -> Result<Option<Url>, FieldError> {
        value.as_deref().map(|v| endpoint(field, v, &vars)).transpose()
    };
    let key_fields = super::api_key::KeyFields {
        kind: f.kind.as_deref(),
        key_header: f.key_header.as_deref(),
        key_scheme: f.key_scheme.as_deref(),
        key_basic: f.key_basic.as_deref(),
        key_basic_user: f.key_basic_user.as_deref(),
        key_url: f.key_url.as_deref(),
        key_prefixes: f.key_prefixes.as_deref(),
        validate: f.validate.as_deref(),
        validate_statuses: f.validate_statuses.as_deref(),
    };
    let api_key = super::api_key::ApiKeySpec::from_fields(&key_fields, |field, raw| endpoint(field, raw, &vars))?;
    let api_base = || -> Result<Url, FieldError> {
        let mut api_base_url = url("api_base_url", &f.api_base_url)?.ok_or_else(|| missing("api_base_url"))?;
        if !api_base_url.path().ends_with('/') {
            // A trailing slash makes the base a directory, so relative joins stay under it.
            let path = format!("{}/", api_base_url.path());
            api_base_url.set_path(&path);
        }
        Ok(api_base_url)
    };
    if let Some(api_key) = api_key {
        return api_key_provider(id, &f, api_key, api_base()?, catalogue);
    }
    let authorization_url =
        url("authorization_url", &f.authorization_url)?.ok_or_else(|| missing("authorization_url"))?;
    let token_url = url("token_url", &f.token_url)?.ok_or_else(|| missing("token_url"))?;
    let api_base_url = api_base()?;
    let client_id = f.client_id.clone().filter(|c| !c.trim().is_empty()).ok_or_else(|| missing("client_id"))?;
    let client_secret = match (&f.client_secret, &f.client_secret_env) {
        (Some(_), Some(_)) => {
            return Err(("client_secret".into(), "give client_secret or client_secret_env, not both".into()));
        }
        (Some(s), None) => Some(SecretString::from(s.clone())),
        (None, Some(var)) => Some(SecretString::from(
            std::env::var(var)
                .map_err(|_| ("client_secret_env".to_owned(), format!("names {var}, which is not set")))?,
        )),
        (None, None) => None,
    };
    let token_auth_method = match f.token_auth_method.as_deref() {
        None | Some("client_secret_basic") | Some("basic") => TokenAuthMethod::ClientSecretBasic,
        Some("client_secret_post") | Some("post") => TokenAuthMethod::ClientSecretPost,
        Some("none") => TokenAuthMethod::None,
        Some(other) => {
            return Err((
                "token_auth_method".into(),
                format!("unknown method {other:?} (client_secret_basic, client_secret_post or none)"),
            ));
        }
    };
    match (token_auth_method, client_secret.is_some()) {
        (TokenAuthMethod::None, true) => {
            return Err(("client_secret".into(), "token_auth_method = \"none\" sends no secret; remove it".into()));
        }
        (TokenAuthMethod::ClientSecretBasic | TokenAuthMethod::ClientSecretPost, false) => {
            return Err((
                "client_secret".into(),
                "missing: give client_secret_env (or client_secret), or token_auth_method = \"none\" for a public client"
                    .into(),
            ));
        }
        _ => {}
    }
    let pkce_required = match f.pkce.as_deref() {
        None | Some("s256") => false,
        Some("required") => true,
        Some(other) => return Err(("pkce".into(), format!("unknown value {other:?} (required or s256)"))),
    };
    let scope_separator = f.scope_separator.clone().unwrap_or_else(|| " ".into());
    if scope_separator != " " && scope_separator != "," {
        return Err(("scope_separator".into(), "must be \" \" or \",\"".into()));
    }
    let scope_param = f.scope_param.clone().unwrap_or_else(|| "scope".into());
    if scope_param.is_empty() || !scope_param.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
        return Err(("scope_param".into(), "must be a parameter name such as scope".into()));
    }
    let extra_authorize_params = f.extra_authorize_params.clone().unwrap_or_default();
    for name in extra_authorize_params.keys() {
        if RESERVED_AUTHORIZE_PARAMS.contains(&name.as_str()) || *name == scope_param {
            return Err(("extra_authorize_params".into(), format!("{name} is set by the broker itself")));
        }
    }
    let scopes = |field: &str, list: &[String]| Scopes::parse(list).map_err(|e| (field.to_owned(), e.to_string()));
    let default_scopes = scopes("scopes", f.scopes.as_deref().unwrap_or_default())?;
    let scope_descriptions = f.available_scopes.clone().unwrap_or_default();
    scopes("available_scopes", &scope_descriptions.keys().cloned().collect::<Vec<_>>())?;
    let scope_aliases = f.scope_aliases.clone().unwrap_or_default();
    scopes("scope_aliases", &scope_aliases.values().cloned().collect::<Vec<_>>())?;
    let scopes_not_returned = scopes("scopes_not_returned", f.scopes_not_returned.as_deref().unwrap_or_default())?;
    let api_base_domains = f.api_base_domains.clone().unwrap_or_default();
    if f.api_base_from_token.is_some() && api_base_domains.is_empty() {
        return Err((
            "api_base_domains".into(),
            "missing: api_base_from_token needs the domains a returned API base may be under".into(),
        ));
    }
    if let Some(agent) = &f.user_agent
        && (agent.is_empty() || agent.len() > 200 || !agent.bytes().all(|b| (0x20..0x7f).contains(&b)))
    {
        return Err(("user_agent".into(), "must be 1-200 printable ASCII characters".into()));
    }
    let api_headers = api_headers(f.api_headers.as_ref(), &client_id)?;
    let refresh_margin = match &f.refresh_margin {
        None => None,
        Some(text) => match crate::clock::parse_duration(text) {
            Ok(d) if d <= MAX_REFRESH_MARGIN => Some(d),
            Ok(_) => return Err(("refresh_margin".into(), "must be at most 1h".into())),
            Err(e) => return Err(("refresh_margin".into(), e)),
        },
    };
    for (field, path) in [
        ("account_id_field", &f.account_id_field),
        ("account_label_field", &f.account_label_field),
        ("token_path", &f.token_path),
        ("api_base_from_token", &f.api_base_from_token),
    ] {
        if let Some(path) = path
            && (path.is_empty() || path.split('.').any(str::is_empty))
        {
            return Err((field.into(), "must be a dot path such as user.id".into()));
        }
    }
    Ok(ProviderConfig {
        display_name: f.display_name.clone().unwrap_or_else(|| id.to_string()),
        id: id.clone(),
        authorization_url,
        token_url,
        client_id,
        client_secret,
        default_scopes,
        api_base_url,
        revocation_url: url("revocation_url", &f.revocation_url)?,
        userinfo_url: url("userinfo_url", &f.userinfo_url)?,
        token_auth_method,
        extra_authorize_params,
        issuer: f.issuer.clone(),
        scope_descriptions,
        refresh_url: url("refresh_url", &f.refresh_url)?,
        scope_separator,
        scope_param,
        pkce_required,
        open_scopes: f.open_scopes.unwrap_or(false),
        scope_aliases,
        scopes_not_returned,
        account_id_field: f.account_id_field.clone(),
        account_label_field: f.account_label_field.clone(),
        token_path: f.token_path.clone(),
        api_base_from_token: f.api_base_from_token.clone(),
        api_base_domains,
        user_agent: f.user_agent.clone(),
        api_headers,
        refresh_margin,
        catalogue,
        api_key: None,
        shared_with_organizations: f.shared_with_organizations.unwrap_or(true),
        source: Some(std::sync::Arc::new(ProviderFields { client_secret: None, client_secret_env: None, ..f.clone() })),
    })
}

/// An organization's own app at a provider: its client, and optionally its default scopes and
/// the template values its URLs need (an Entra tenant, an Okta domain).
#[derive(Debug, Clone, Copy)]
pub struct AppSettings<'a> {
    pub client_id: &'a str,
    /// `None`: a public client (`token_auth_method = none`).
    pub client_secret: Option<&'a SecretString>,
    pub scopes: Option<&'a Scopes>,
    pub template_values: &'a BTreeMap<String, String>,
}

/// `base` (the operator's provider) with an organization's own app: the same entry, checked
/// the same way, with the organization's client, scopes and template values. An error names
/// the field, as for the operator's table.
pub fn with_app(base: &ProviderConfig, app: &AppSettings<'_>) -> Result<ProviderConfig, ProviderConfigError> {
    let err = |field: &str, message: String| ProviderConfigError {
        provider: base.id.to_string(),
        field: field.to_owned(),
        message,
    };
    if base.is_api_key() {
        return Err(err("kind", "users of an api_key provider enter their own key: there is no app to set".into()));
    }
    if app.client_id.trim().is_empty() || app.client_id.len() > 512 || app.client_id.chars().any(char::is_control) {
        return Err(err("client_id", "must be 1-512 characters without control characters".into()));
    }
    let method = |base_method: TokenAuthMethod| match (app.client_secret.is_some(), base_method) {
        (false, _) => TokenAuthMethod::None,
        (true, TokenAuthMethod::None) => TokenAuthMethod::ClientSecretBasic,
        (true, method) => method,
    };
    let Some(source) = &base.source else {
        // An entry the broker makes itself (the demo provider, a server's authorization server):
        // only the client and the scopes are the organization's.
        if let Some(name) = app.template_values.keys().next() {
            return Err(err(name, "this provider takes no template values".into()));
        }
        let mut config = base.clone();
        config.client_id = app.client_id.to_owned();
        config.client_secret = app.client_secret.cloned();
        config.token_auth_method = method(base.token_auth_method);
        if let Some(scopes) = app.scopes {
            config.default_scopes = scopes.clone();
        }
        return Ok(config);
    };
    let mut fields = (**source).clone();
    let takes = fields.templates();
    for (name, value) in app.template_values {
        if !takes.contains(&name.as_str()) {
            let known = if takes.is_empty() { "none".to_owned() } else { takes.join(", ") };
            return Err(err(name, format!("not a template value of this provider (it takes: {known})")));
        }
        let slot = match name.as_str() {
            "tenant" => &mut fields.tenant,
            "domain" => &mut fields.domain,
            "subdomain" => &mut fields.subdomain,
            "shop" => &mut fields.shop,
            _ => &mut fields.base_url,
        };
        *slot = Some(value.clone());
    }
    fields.client_id = Some(app.client_id.to_owned());
    fields.client_secret = app.client_secret.map(|s| secrecy::ExposeSecret::expose_secret(s).to_owned());
    fields.client_secret_env = None;
    fields.token_auth_method = Some(
        match method(base.token_auth_method) {
            TokenAuthMethod::ClientSecretBasic => "client_secret_basic",
            TokenAuthMethod::ClientSecretPost => "client_secret_post",
            TokenAuthMethod::None => "none",
        }
        .to_owned(),
    );
    if let Some(scopes) = app.scopes {
        fields.scopes = Some(scopes.iter().map(str::to_owned).collect());
    }
    let mut config =
        build(&base.id, fields, base.catalogue.clone()).map_err(|(field, message)| err(&field, message))?;
    config.shared_with_organizations = base.shared_with_organizations;
    Ok(config)
}

/// An `api_key` entry: the API base, its headers and the key's spec. It has no OAuth endpoints
/// or client; `authorization_url` and `token_url` hold the API base only so the type stays one
/// (the flow refuses to start OAuth for it: [`crate::broker::api_key`]).
fn api_key_provider(
    id: &ProviderId,
    f: &ProviderFields,
    api_key: super::api_key::ApiKeySpec,
    api_base_url: Url,
    catalogue: Option<String>,
) -> Result<ProviderConfig, FieldError> {
    for (field, given) in [
        ("authorization_url", f.authorization_url.is_some()),
        ("token_url", f.token_url.is_some()),
        ("refresh_url", f.refresh_url.is_some()),
        ("revocation_url", f.revocation_url.is_some()),
        ("userinfo_url", f.userinfo_url.is_some()),
        ("client_id", f.client_id.is_some()),
        ("client_secret", f.client_secret.is_some() || f.client_secret_env.is_some()),
        ("scopes", f.scopes.is_some()),
        ("api_base_from_token", f.api_base_from_token.is_some()),
    ] {
        if given {
            return Err((field.into(), "an api_key provider has no OAuth settings: the user enters the key".into()));
        }
    }
    if let Some(agent) = &f.user_agent
        && (agent.is_empty() || agent.len() > 200 || !agent.bytes().all(|b| (0x20..0x7f).contains(&b)))
    {
        return Err(("user_agent".into(), "must be 1-200 printable ASCII characters".into()));
    }
    let api_headers = api_headers(f.api_headers.as_ref(), "")?;
    if let super::api_key::KeySend::Header { name, .. } = &api_key.send
        && api_headers.iter().any(|(h, _)| h == name)
    {
        return Err(("api_headers".into(), format!("{name} carries the key")));
    }
    for (field, path) in [("account_id_field", &f.account_id_field), ("account_label_field", &f.account_label_field)] {
        if let Some(path) = path
            && (path.is_empty() || path.split('.').any(str::is_empty))
        {
            return Err((field.into(), "must be a dot path such as user.id".into()));
        }
    }
    if (f.account_id_field.is_some() || f.account_label_field.is_some()) && api_key.validation.is_none() {
        return Err(("account_id_field".into(), "read from the validate answer: give validate too".into()));
    }
    Ok(ProviderConfig {
        display_name: f.display_name.clone().unwrap_or_else(|| id.to_string()),
        id: id.clone(),
        authorization_url: api_base_url.clone(),
        token_url: api_base_url.clone(),
        client_id: String::new(),
        client_secret: None,
        default_scopes: Scopes::default(),
        api_base_url,
        revocation_url: None,
        userinfo_url: None,
        token_auth_method: TokenAuthMethod::None,
        extra_authorize_params: BTreeMap::new(),
        issuer: None,
        scope_descriptions: BTreeMap::new(),
        refresh_url: None,
        scope_separator: " ".into(),
        scope_param: "scope".into(),
        pkce_required: false,
        open_scopes: false,
        scope_aliases: BTreeMap::new(),
        scopes_not_returned: Scopes::default(),
        account_id_field: f.account_id_field.clone(),
        account_label_field: f.account_label_field.clone(),
        token_path: None,
        api_base_from_token: None,
        api_base_domains: Vec::new(),
        user_agent: f.user_agent.clone(),
        api_headers,
        refresh_margin: None,
        catalogue,
        api_key: Some(api_key),
        shared_with_organizations: true,
        source: None,
    })
}

/// Headers the broker sets itself (or that would carry or reshape credentials and the
/// request); an entry may not override them.
const RESERVED_API_HEADERS: [&str; 9] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "accept",
];

/// `api_headers` checked and `{client_id}` filled. The only template: a header must not become
/// a way to send a secret (the client secret stays out of API calls).
fn api_headers(
    raw: Option<&BTreeMap<String, String>>,
    client_id: &str,
) -> Result<Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>, FieldError> {
    let mut headers = Vec::new();
    for (name, value) in raw.into_iter().flatten() {
        let bad = |why: String| ("api_headers".to_owned(), format!("{name}: {why}"));
        let header =
            reqwest::header::HeaderName::try_from(name.as_str()).map_err(|_| bad("not a header name".into()))?;
        if RESERVED_API_HEADERS.contains(&header.as_str()) {
            return Err(bad("set by the broker itself".into()));
        }
        let filled = value.replace("{client_id}", client_id);
        if filled.contains('{') || filled.contains('}') {
            return Err(bad("the only template is {client_id}".into()));
        }
        if filled.is_empty() || filled.len() > 512 || !filled.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return Err(bad("must be 1-512 printable ASCII characters".into()));
        }
        let value = reqwest::header::HeaderValue::from_str(&filled).map_err(|_| bad("not a header value".into()))?;
        headers.push((header, value));
    }
    Ok(headers)
}

/// The operator's template values, each checked so it cannot change a URL's shape (a domain
/// with a path, a shop name with a dot).
fn template_values(f: &ProviderFields) -> Result<BTreeMap<&'static str, String>, FieldError> {
    let mut values = BTreeMap::new();
    for name in TEMPLATE_NAMES {
        let Some(value) = f.template_value(name) else { continue };
        let ok = match name {
            "base_url" => {
                let url = Url::parse(value).map_err(|e| (name.to_owned(), format!("not a URL: {e}")))?;
                check_scheme(&url).map_err(|m| (name.to_owned(), m))?;
                if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
                    return Err((name.into(), "must have no query, fragment or user".into()));
                }
                values.insert(name, url.as_str().trim_end_matches('/').to_owned());
                continue;
            }
            "domain" | "tenant" => host_like(value, true),
            _ => host_like(value, false),
        };
        if !ok {
            let what = if name == "domain" || name == "tenant" {
                "letters, digits, '-' and '.'"
            } else {
                "letters, digits and '-'"
            };
            return Err((name.into(), format!("{value:?} is not valid here: use {what} only")));
        }
        values.insert(name, value.to_owned());
    }
    Ok(values)
}

fn host_like(value: &str, dots: bool) -> bool {
    !value.is_empty()
        && value.len() <= 253
        && !value.starts_with(['-', '.'])
        && !value.ends_with(['-', '.'])
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || (dots && b == b'.'))
}

/// A URL field with its templates filled, parsed and checked.
fn endpoint(field: &str, raw: &str, vars: &BTreeMap<&'static str, String>) -> Result<Url, FieldError> {
    let mut filled = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(start) = rest.find('{') {
        filled.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let end = after.find('}').ok_or_else(|| (field.to_owned(), "an unclosed '{'".to_owned()))?;
        let name = &after[..end];
        if !TEMPLATE_NAMES.contains(&name) {
            return Err((field.into(), format!("unknown template {{{name}}} (known: {})", TEMPLATE_NAMES.join(", "))));
        }
        let value = vars.get(name).ok_or_else(|| {
            (field.to_owned(), format!("{{{name}}} is not filled: add {name} = \"…\" to this provider's table"))
        })?;
        filled.push_str(value);
        rest = &after[end + 1..];
    }
    filled.push_str(rest);
    let url = Url::parse(&filled).map_err(|e| (field.to_owned(), format!("not a URL: {e}")))?;
    check_scheme(&url).map_err(|m| (field.to_owned(), m))?;
    Ok(url)
}

fn check_scheme(url: &Url) -> Result<(), String> {
    match url.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(url) => Ok(()),
        _ => Err(format!("{url}: must be https (http only on loopback)")),
    }
}

#[cfg(test)]
#[path = "catalogue_tests.rs"]
mod tests;
