use super::*;

fn id(s: &str) -> ProviderId {
    ProviderId::parse(s).unwrap()
}

fn creds() -> ProviderFields {
    ProviderFields { client_id: Some("client".into()), client_secret: Some("secret".into()), ..Default::default() }
}

/// Values for every template, as an operator would give them.
fn filled(mut fields: ProviderFields) -> ProviderFields {
    fields.tenant = fields.tenant.or(Some("contoso.onmicrosoft.com".into()));
    fields.domain = fields.domain.or(Some("example.okta.com".into()));
    fields.subdomain = fields.subdomain.or(Some("acme".into()));
    fields.shop = fields.shop.or(Some("acme-store".into()));
    fields
}

fn error(provider: &str, table: ProviderFields) -> ProviderConfigError {
    resolve(&id(provider), table).unwrap_err()
}

#[test]
fn the_catalogue_has_at_least_30_providers_and_every_entry_resolves_over_https() {
    let catalogue = builtin().unwrap();
    assert!(catalogue.len() >= 30, "{} entries", catalogue.len());
    for (name, entry) in &catalogue {
        assert!(entry.client_id.is_none() && entry.client_secret.is_none(), "{name}: credentials in the catalogue");
        assert!(entry.catalogue.is_none(), "{name}");
        assert!(entry.display_name.is_some(), "{name}: no display name");
        // An API-key provider has no client: the user brings the key.
        let table = if entry.kind.as_deref() == Some("api_key") { ProviderFields::default() } else { creds() };
        let provider = resolve(&id(name), filled(table)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let urls = [
            Some(&provider.authorization_url),
            Some(&provider.token_url),
            Some(&provider.api_base_url),
            provider.refresh_url.as_ref(),
            provider.revocation_url.as_ref(),
            provider.userinfo_url.as_ref(),
        ];
        for url in urls.into_iter().flatten() {
            assert_eq!(url.scheme(), "https", "{name}: {url}");
            assert!(!url.as_str().contains('{'), "{name}: unfilled {url}");
        }
        assert_eq!(provider.catalogue.as_deref(), Some(name.as_str()));
        // Every default scope is one the entry offers and describes.
        for scope in provider.default_scopes.iter() {
            assert!(provider.scope_description(scope).is_some(), "{name}: default scope {scope} is not described");
        }
        // The account is named when there is somewhere to read it from.
        if provider.userinfo_url.is_some() {
            assert!(provider.account_id_field.is_some(), "{name}: userinfo without account_id_field");
        }
    }
}

#[test]
fn the_named_providers_of_the_issue_are_all_in_the_catalogue() {
    let catalogue = builtin().unwrap();
    for name in [
        "github",
        "gitlab",
        "bitbucket",
        "google",
        "microsoft",
        "slack",
        "discord",
        "notion",
        "linear",
        "atlassian",
        "asana",
        "dropbox",
        "box",
        "salesforce",
        "hubspot",
        "zoom",
        "spotify",
        "figma",
        "airtable",
        "x",
        "linkedin",
        "reddit",
        "okta",
        "auth0",
        "shopify",
        "zendesk",
        "intercom",
        "calendly",
        "todoist",
        "strava",
        "twitch",
    ] {
        assert!(catalogue.contains_key(name), "{name} is missing");
    }
}

#[test]
fn the_quirks_the_issue_names_are_in_the_entries() {
    let get = |name: &str| resolve(&id(name), filled(creds())).unwrap();
    let google = get("google");
    assert_eq!(google.extra_authorize_params.get("access_type").map(String::as_str), Some("offline"));
    assert_eq!(google.extra_authorize_params.get("prompt").map(String::as_str), Some("consent"));
    assert_eq!(get("dropbox").extra_authorize_params.get("token_access_type").map(String::as_str), Some("offline"));
    let reddit = get("reddit");
    assert_eq!(reddit.extra_authorize_params.get("duration").map(String::as_str), Some("permanent"));
    assert_eq!(reddit.token_auth_method, TokenAuthMethod::ClientSecretBasic);
    let atlassian = get("atlassian");
    assert_eq!(atlassian.extra_authorize_params.get("audience").map(String::as_str), Some("api.atlassian.com"));
    assert!(atlassian.default_scopes.contains("offline_access"));
    assert!(get("airtable").pkce_required && get("x").pkce_required);
    let slack = get("slack");
    assert_eq!((slack.scope_param.as_str(), slack.token_path.as_deref()), ("user_scope", Some("authed_user")));
    assert_eq!(get("salesforce").api_base_from_token.as_deref(), Some("instance_url"));
    assert_eq!(get("github").account_id_field.as_deref(), Some("id"), "the numeric id, not the login");
    assert_eq!(get("linear").scope_separator, ",");
}

#[test]
fn an_operator_enables_a_provider_with_credentials_alone() {
    let github = resolve(&id("github"), creds()).unwrap();
    assert_eq!(github.authorization_url.as_str(), "https://github.com/login/oauth/authorize");
    assert_eq!(github.api_base_url.as_str(), "https://api.github.com/");
    assert_eq!(github.display_name, "GitHub");
}

#[test]
fn any_field_can_be_overridden_and_templates_come_from_the_table() {
    let table =
        ProviderFields { display_name: Some("Work GitHub".into()), scopes: Some(vec!["repo".into()]), ..creds() };
    let github = resolve(&id("github"), table).unwrap();
    assert_eq!(
        (github.display_name.as_str(), github.default_scopes.to_space_separated()),
        ("Work GitHub", "repo".into())
    );

    let gitlab = resolve(&id("gitlab"), creds()).unwrap();
    assert_eq!(gitlab.token_url.as_str(), "https://gitlab.com/oauth/token", "the catalogue's default base_url");
    let own = ProviderFields { base_url: Some("https://git.example.com/".into()), ..creds() };
    let gitlab = resolve(&id("gitlab"), own).unwrap();
    assert_eq!(gitlab.api_base_url.as_str(), "https://git.example.com/api/v4/");

    let entra = ProviderFields { tenant: Some("organizations".into()), ..creds() };
    let entra = resolve(&id("microsoft"), entra).unwrap();
    assert!(entra.token_url.as_str().starts_with("https://login.microsoftonline.com/organizations/"));

    // A second GitLab under another id.
    let second = ProviderFields {
        catalogue: Some("gitlab".into()),
        base_url: Some("https://gitlab.internal.example".into()),
        ..creds()
    };
    let second = resolve(&id("gitlab-internal"), second).unwrap();
    assert_eq!((second.display_name.as_str(), second.catalogue.as_deref()), ("GitLab", Some("gitlab")));
}

#[test]
fn an_unfilled_template_names_the_provider_and_the_field() {
    let e = error("okta", creds());
    assert_eq!((e.provider.as_str(), e.field.as_str()), ("okta", "authorization_url"));
    assert!(e.to_string().starts_with("[providers.okta] authorization_url: {domain} is not filled"), "{e}");
    let e = error("shopify", creds());
    assert!(e.to_string().contains("{shop} is not filled"), "{e}");
}

#[test]
fn template_values_cannot_change_the_shape_of_a_url() {
    for (name, table) in [
        ("okta", ProviderFields { domain: Some("evil.example/steal?".into()), ..creds() }),
        ("okta", ProviderFields { domain: Some("user@evil.example".into()), ..creds() }),
        ("shopify", ProviderFields { shop: Some("evil.example#".into()), ..creds() }),
        ("zendesk", ProviderFields { subdomain: Some("a.evil".into()), ..creds() }),
        ("gitlab", ProviderFields { base_url: Some("http://gitlab.example.com".into()), ..creds() }),
        ("gitlab", ProviderFields { base_url: Some("https://gitlab.example.com/?x=1".into()), ..creds() }),
    ] {
        let e = error(name, table);
        assert!(["domain", "shop", "subdomain", "base_url"].contains(&e.field.as_str()), "{name}: {e}");
    }
}

#[test]
fn inconsistent_entries_stop_start_up_with_the_provider_and_field_named() {
    let cases: Vec<(&str, ProviderFields, &str)> = vec![
        (
            "custom",
            ProviderFields {
                token_url: Some("https://t.example".into()),
                api_base_url: Some("https://a.example".into()),
                ..creds()
            },
            "authorization_url",
        ),
        (
            "custom",
            ProviderFields {
                authorization_url: Some("https://a.example".into()),
                api_base_url: Some("https://a.example".into()),
                ..creds()
            },
            "token_url",
        ),
        ("github", ProviderFields { token_url: Some("http://github.example/token".into()), ..creds() }, "token_url"),
        (
            "github",
            ProviderFields { token_auth_method: Some("client_secret_jwt".into()), ..creds() },
            "token_auth_method",
        ),
        ("github", ProviderFields { client_id: None, ..creds() }, "client_id"),
        ("github", ProviderFields { client_secret: None, ..creds() }, "client_secret"),
        ("github", ProviderFields { pkce: Some("plain".into()), ..creds() }, "pkce"),
        ("github", ProviderFields { scope_separator: Some(";".into()), ..creds() }, "scope_separator"),
        ("github", ProviderFields { scopes: Some(vec!["a b".into()]), ..creds() }, "scopes"),
        ("github", ProviderFields { catalogue: Some("nope".into()), ..creds() }, "catalogue"),
        ("github", ProviderFields { userinfo_url: Some("https://{nope}/x".into()), ..creds() }, "userinfo_url"),
        (
            "github",
            ProviderFields {
                client_secret_env: Some("OAUTH_BROKER_TEST_SURELY_UNSET".into()),
                client_secret: None,
                ..creds()
            },
            "client_secret_env",
        ),
    ];
    for (provider, table, field) in cases {
        let e = error(provider, table);
        assert_eq!((e.provider.as_str(), e.field.as_str()), (provider, field), "{e}");
        assert!(e.to_string().starts_with(&format!("[providers.{provider}] {field}: ")), "{e}");
    }
}

#[test]
fn extra_authorize_params_cannot_replace_the_brokers_own() {
    for name in ["redirect_uri", "state", "code_challenge", "client_id", "scope", "response_type"] {
        let params = BTreeMap::from([(name.to_owned(), "x".to_owned())]);
        let e = error("github", ProviderFields { extra_authorize_params: Some(params), ..creds() });
        assert_eq!(e.field, "extra_authorize_params", "{name}");
    }
    let params = BTreeMap::from([("user_scope".to_owned(), "x".to_owned())]);
    assert_eq!(
        error("slack", ProviderFields { extra_authorize_params: Some(params), ..creds() }).field,
        "extra_authorize_params"
    );
}

#[test]
fn a_public_client_sends_no_secret_and_a_returned_api_base_needs_its_domains() {
    let public = ProviderFields { token_auth_method: Some("none".into()), client_secret: None, ..creds() };
    assert_eq!(resolve(&id("github"), public).unwrap().token_auth_method, TokenAuthMethod::None);
    let both = ProviderFields { token_auth_method: Some("none".into()), ..creds() };
    assert_eq!(error("github", both).field, "client_secret");
    let open = ProviderFields { api_base_domains: Some(Vec::new()), ..creds() };
    assert_eq!(error("salesforce", open).field, "api_base_domains");
}

#[test]
fn api_headers_are_filled_and_checked() {
    let provider = |name: &str, headers: &[(&str, &str)]| {
        let table = ProviderFields {
            client_id: Some("the-client".into()),
            client_secret: Some("s".into()),
            api_headers: (!headers.is_empty())
                .then(|| headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()),
            ..Default::default()
        };
        resolve(&ProviderId::parse(name).unwrap(), table)
    };
    let twitch = provider("twitch", &[]).unwrap();
    assert_eq!(twitch.api_headers.len(), 1);
    assert_eq!(
        (twitch.api_headers[0].0.as_str(), twitch.api_headers[0].1.to_str().unwrap()),
        ("client-id", "the-client")
    );
    let notion = provider("notion", &[]).unwrap();
    assert_eq!(notion.api_headers[0].0.as_str(), "notion-version");
    for (bad, field) in [
        (("Authorization", "Bearer x"), "set by the broker"),
        (("Host", "evil.example"), "set by the broker"),
        (("X-Secret", "{client_secret}"), "the only template"),
        (("Bad Name", "x"), "not a header name"),
        (("X-Line", "a\r\nInjected: 1"), "printable ASCII"),
    ] {
        let error = provider("github", &[bad]).unwrap_err();
        assert_eq!(error.field, "api_headers");
        assert!(error.message.contains(field), "{bad:?}: {}", error.message);
    }
}

#[test]
fn a_provider_refresh_margin_is_a_duration_of_at_most_an_hour() {
    let provider = |margin: &str| {
        let table = ProviderFields {
            client_id: Some("c".into()),
            client_secret: Some("s".into()),
            refresh_margin: Some(margin.into()),
            ..Default::default()
        };
        resolve(&ProviderId::parse("github").unwrap(), table)
    };
    assert_eq!(provider("2m").unwrap().refresh_margin, Some(std::time::Duration::from_secs(120)));
    assert_eq!(provider("2h").unwrap_err().field, "refresh_margin");
    assert_eq!(provider("soon").unwrap_err().field, "refresh_margin");
}

#[test]
fn required_scopes_are_among_the_defaults_and_only_the_catalogue_sets_them() {
    let catalogue = builtin().unwrap();
    let mut marked = 0;
    for (name, entry) in &catalogue {
        let required = required_scopes(name);
        let defaults = Scopes::parse(entry.scopes.clone().unwrap_or_default()).unwrap();
        assert!(defaults.is_superset_of(&required), "{name}: required {required:?} not among the defaults");
        marked += usize::from(!required.is_empty());
    }
    assert!(marked >= 5, "the OpenID providers mark openid as required");
    assert!(required_scopes("google").contains("openid") && required_scopes("github").is_empty());
    let table = ProviderFields { required_scopes: Some(vec!["repo".into()]), ..creds() };
    assert_eq!(error("github", table).field, "required_scopes");
}

#[test]
fn at_least_five_api_key_providers_say_how_their_key_is_sent_and_where_to_make_one() {
    use crate::providers::api_key::KeySend;
    let catalogue = builtin().unwrap();
    let api_key: Vec<_> = catalogue.iter().filter(|(_, e)| e.kind.as_deref() == Some("api_key")).collect();
    assert!(api_key.len() >= 5, "{} api_key entries", api_key.len());
    for (name, _) in api_key {
        let provider = resolve(&id(name), ProviderFields::default()).unwrap();
        let spec = provider.api_key.as_ref().unwrap();
        assert!(spec.key_url.as_ref().is_some_and(|u| u.scheme() == "https"), "{name}: no key_url");
        assert!(provider.refresh_url.is_none() && provider.revocation_url.is_none(), "{name}");
    }
    let send = |name: &str| resolve(&id(name), ProviderFields::default()).unwrap().api_key.unwrap().send;
    let header = |name: &'static str, scheme: Option<&str>| KeySend::Header {
        name: reqwest::header::HeaderName::from_static(name),
        scheme: scheme.map(str::to_owned),
    };
    assert_eq!(send("openai"), header("authorization", Some("Bearer")));
    assert_eq!(send("anthropic"), header("x-api-key", None));
    assert_eq!(send("gitlab-pat"), header("private-token", None));
    assert_eq!(send("linear-key"), header("authorization", None));
    assert_eq!(send("stripe"), KeySend::BasicUser);
    assert_eq!(send("mailgun"), KeySend::BasicPassword { user: "api".into() });
}

#[test]
fn an_api_key_entry_takes_no_oauth_settings_and_an_oauth_one_no_key_settings() {
    let with_client = ProviderFields { client_id: Some("c".into()), ..Default::default() };
    assert_eq!(error("openai", with_client).field, "client_id");
    let keyed = ProviderFields { key_header: Some("X-Key".into()), ..creds() };
    assert_eq!(error("github", keyed).field, "key_header");
    let cookie = ProviderFields { key_header: Some("Cookie".into()), ..Default::default() };
    assert_eq!(error("openai", cookie).field, "key_header");
    let both = ProviderFields { key_basic: Some("username".into()), ..Default::default() };
    assert_eq!(error("openai", both).field, "key_basic");
    let unknown = ProviderFields { kind: Some("saml".into()), ..Default::default() };
    assert_eq!(error("openai", unknown).field, "kind");
}

fn app<'a>(
    client_id: &'a str,
    secret: Option<&'a SecretString>,
    templates: &'a BTreeMap<String, String>,
) -> AppSettings<'a> {
    AppSettings { client_id, client_secret: secret, scopes: None, template_values: templates }
}

#[test]
fn an_organizations_app_is_the_operators_entry_with_its_own_client_and_template_values() {
    let operator = resolve(&id("microsoft"), creds()).unwrap();
    assert!(operator.authorization_url.as_str().contains("/common/"), "{}", operator.authorization_url);
    let secret = SecretString::from("acme-secret");
    let tenant = BTreeMap::from([("tenant".to_owned(), "acme.onmicrosoft.com".to_owned())]);
    let acme = with_app(&operator, &app("acme-client", Some(&secret), &tenant)).unwrap();
    assert_eq!(acme.client_id, "acme-client");
    assert_eq!(secrecy::ExposeSecret::expose_secret(acme.client_secret.as_ref().unwrap()), "acme-secret");
    assert!(acme.authorization_url.as_str().contains("/acme.onmicrosoft.com/"), "{}", acme.authorization_url);
    assert!(acme.token_url.as_str().contains("/acme.onmicrosoft.com/"), "{}", acme.token_url);
    assert_eq!(acme.default_scopes, operator.default_scopes, "the operator's defaults unless the app names its own");
    assert!(operator.source.as_ref().unwrap().client_secret.is_none(), "the kept table holds no secret");

    // Without a secret: a public client.
    let public = with_app(&operator, &app("acme-public", None, &BTreeMap::new())).unwrap();
    assert_eq!((public.token_auth_method, public.client_secret.is_none()), (TokenAuthMethod::None, true));
}

#[test]
fn an_organizations_app_gets_the_checks_the_operators_table_gets() {
    let operator = resolve(&id("microsoft"), creds()).unwrap();
    let secret = SecretString::from("s");
    let cases = [
        (BTreeMap::from([("domain".to_owned(), "x.okta.com".to_owned())]), "domain", "not a template value"),
        (BTreeMap::from([("tenant".to_owned(), "evil.example/../x".to_owned())]), "tenant", ""),
    ];
    for (templates, field, why) in cases {
        let error = with_app(&operator, &app("c", Some(&secret), &templates)).unwrap_err();
        assert_eq!(error.field, field, "{error}");
        assert!(error.message.contains(why), "{error}");
    }
    let error = with_app(&operator, &app(" ", Some(&secret), &BTreeMap::new())).unwrap_err();
    assert_eq!(error.field, "client_id");
    let github = resolve(&id("github"), creds()).unwrap();
    let tenant = BTreeMap::from([("tenant".to_owned(), "t".to_owned())]);
    let error = with_app(&github, &app("c", Some(&secret), &tenant)).unwrap_err();
    assert!(error.message.contains("takes: none"), "{error}");
}

#[test]
fn an_api_key_provider_has_no_app_to_set() {
    let catalogue = builtin().unwrap();
    let (name, _) = catalogue.iter().find(|(_, e)| e.kind.as_deref() == Some("api_key")).unwrap();
    let provider = resolve(&id(name), ProviderFields::default()).unwrap();
    let error = with_app(&provider, &app("c", None, &BTreeMap::new())).unwrap_err();
    assert_eq!(error.field, "kind", "{error}");
}

#[test]
fn the_catalogue_never_decides_whether_the_operators_app_is_shared() {
    let operator = resolve(&id("github"), creds()).unwrap();
    assert!(operator.shared_with_organizations, "shared unless the operator says otherwise");
    let kept = resolve(&id("github"), ProviderFields { shared_with_organizations: Some(false), ..creds() }).unwrap();
    assert!(!kept.shared_with_organizations);
}
