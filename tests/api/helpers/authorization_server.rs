//! An OAuth client of the broker's authorization server, step by step: registration, the
//! browser through `/authorize` and its consent page, and `/token`; and tokens a client got for
//! a tool server's resource.

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use oauth_broker::pkce;
use serde_json::{Value, json};

use super::{ALICE, TestApp, hidden_fields, location};

pub const REDIRECT_URI: &str = "http://127.0.0.1:33418/callback";
pub const STATE: &str = "client-state-123";

pub fn new_pkce() -> (String, String) {
    let verifier = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    let challenge = pkce::s256(&verifier);
    (verifier, challenge)
}

pub async fn register(app: &TestApp, metadata: Value) -> reqwest::Response {
    app.http().post(app.url("/register")).json(&metadata).send().await.unwrap()
}

/// A public client (PKCE only) that may refresh; returns its client_id.
pub(crate) async fn register_public_client(app: &TestApp, name: &str) -> String {
    let response = register(
        app,
        json!({"client_name": name, "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none",
               "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"]}),
    )
    .await;
    assert_eq!(response.status(), 201);
    response.json::<Value>().await.unwrap()["client_id"].as_str().unwrap().to_owned()
}

/// A well-formed authorization request's parameters, for tests to change.
pub fn authorize_params(app: &TestApp, client_id: &str, challenge: &str) -> Vec<(String, String)> {
    [
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", REDIRECT_URI),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        ("state", STATE),
        ("resource", &app.mcp_url()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// `params` with `key` set to `value`, or removed when `value` is `None`.
pub fn with(mut params: Vec<(String, String)>, key: &str, value: Option<&str>) -> Vec<(String, String)> {
    params.retain(|(k, _)| k != key);
    if let Some(value) = value {
        params.push((key.to_owned(), value.to_owned()));
    }
    params
}

pub fn authorize_url(app: &TestApp, params: &[(String, String)]) -> String {
    let query: String = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(params).finish();
    app.url(&format!("/authorize?{query}"))
}

/// Opens `url`, signing alice in on the way if needed, and returns the consent page.
pub async fn consent_page(app: &TestApp, browser: &reqwest::Client, url: &str) -> String {
    let first = browser.get(url).send().await.unwrap();
    if first.status() == 303 {
        let login = location(&first);
        assert!(login.starts_with("/login?next="), "{login}");
        let login_url = url::Url::parse(&app.url(&login)).unwrap();
        let next = login_url.query_pairs().find(|(k, _)| k == "next").unwrap().1.into_owned();
        assert!(next.starts_with("/authorize?"), "{next}");
        let signed_in = app.sign_in(browser, ALICE, &next).await;
        assert_eq!(signed_in.status(), 303);
        assert_eq!(location(&signed_in), next, "sign-in returns to the authorization request");
        let again = browser.get(app.url(&next)).send().await.unwrap();
        assert_eq!(again.status(), 200, "consent page after sign-in");
        return again.text().await.unwrap();
    }
    assert_eq!(first.status(), 200, "consent page");
    first.text().await.unwrap()
}

/// Posts the consent form (its hidden fields, changed by `tweak`) with `action`.
pub async fn submit_consent(
    app: &TestApp,
    browser: &reqwest::Client,
    html: &str,
    action: &str,
    tweak: impl FnOnce(&mut Vec<(String, String)>),
) -> reqwest::Response {
    let mut form = hidden_fields(html);
    tweak(&mut form);
    form.push(("action".into(), action.into()));
    browser.post(app.url("/authorize")).form(&form).send().await.unwrap()
}

/// The query of a 302 back to the client's redirect URI.
pub fn callback_params(response: &reqwest::Response) -> HashMap<String, String> {
    assert_eq!(response.status(), 302, "a redirect back to the client");
    let target = location(response);
    assert!(target.starts_with(REDIRECT_URI), "{target}");
    url::Url::parse(&target).unwrap().query_pairs().into_owned().collect()
}

pub async fn token_request<T: serde::Serialize + ?Sized>(app: &TestApp, form: &T) -> reqwest::Response {
    app.http().post(app.url("/token")).form(form).send().await.unwrap()
}

pub fn jwt_claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

pub(crate) const TOOL_SERVER: &str = "https://tools.example/mcp";

/// Alice approves `client_id` for the tool server's resource: (access, refresh) tokens whose
/// `aud` is the tool server.
pub(crate) async fn tool_server_tokens(app: &TestApp, client_id: &str) -> (String, String) {
    let (verifier, challenge) = new_pkce();
    let browser = app.browser();
    let url = authorize_url(app, &with(authorize_params(app, client_id, &challenge), "resource", Some(TOOL_SERVER)));
    let html = consent_page(app, &browser, &url).await;
    let code = callback_params(&submit_consent(app, &browser, &html, "approve", |_| {}).await)["code"].clone();
    let form = [
        ("grant_type", "authorization_code"),
        ("client_id", client_id),
        ("code", &code),
        ("redirect_uri", REDIRECT_URI),
        ("code_verifier", &verifier),
        ("resource", TOOL_SERVER),
    ];
    let tokens: Value = token_request(app, &form).await.json().await.unwrap();
    assert_eq!(jwt_claims(tokens["access_token"].as_str().unwrap())["aud"], TOOL_SERVER);
    (tokens["access_token"].as_str().unwrap().to_owned(), tokens["refresh_token"].as_str().unwrap().to_owned())
}
