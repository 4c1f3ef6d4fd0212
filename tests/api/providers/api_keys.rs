//! API-key connections end to end (issue 27 item 3): the demo provider's key mode as the third
//! party (`demo_api_keys = true` adds provider `demo-key`, which checks keys strictly and says
//! why it refuses one), the connect page reached by the same URL elicitation as OAuth, and the
//! key used by `provider_request`, `/v1/proxy` and `/v1/tokens`. Every security rule of the
//! page is tried: another user's browser, a missing CSRF token, a wrong key; and the key is
//! looked for wherever it must not be (pages, logs, audit, the database in clear).

use std::sync::{Arc, Mutex};

use fantoccini::Locator;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::token_api::{ServiceOptions, register_service, user_token_for};
use crate::helpers::*;

const PROVIDER: &str = "demo-key";
const RESOURCE: &str = "https://keys-tool.example/mcp";

async fn spawn(backend: Backend) -> Option<TestApp> {
    let options = SpawnOptions { toml: "demo_api_keys = true\n".into(), ..Default::default() };
    spawn_app_opts(backend, options, |builder| builder).await
}

macro_rules! with_keys_on_both_backends {
    ($name:ident, $body:ident) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let app = spawn(Backend::Sqlite).await.unwrap();
                $body(&app).await;
                app.stop().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(app) = spawn(Backend::Postgres).await else { return };
                $body(&app).await;
                app.stop().await;
            }
        }
    };
}

/// A key the demo provider issues to `account` on its keys page (shown there once).
async fn demo_key(app: &TestApp, account: &str) -> String {
    let page = app.http().post(app.url("/demo-provider/keys")).form(&[("account", account)]).send().await.unwrap();
    assert_eq!(page.status(), 200, "the demo provider issues a key");
    let html = page.text().await.unwrap();
    let start = html.find("<code id=\"api-key\">").expect("the new key is on the page") + "<code id=\"api-key\">".len();
    html[start..].split('<').next().unwrap().to_owned()
}

async fn revoke_demo_key(app: &TestApp, key: &str) {
    let done = app.http().post(app.url("/demo-provider/keys/revoke")).form(&[("key", key)]).send().await.unwrap();
    assert_eq!(done.status(), 200, "the demo provider revokes the key");
}

fn me() -> Value {
    json!({"provider": PROVIDER, "method": "GET", "path": "/me"})
}

/// The connect link a URL-mode client gets for the key provider (-32042).
async fn connect_link(client: &McpClient) -> String {
    match client.call("provider_request", me()).await {
        Err(rmcp::ServiceError::McpError(e)) => {
            assert_eq!(e.code.0, -32042, "{e:?}");
            e.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned()
        }
        other => panic!("expected -32042, got {other:?}"),
    }
}

/// Signs `name` in on `browser` and opens the key page; returns its HTML.
async fn key_page(app: &TestApp, browser: &reqwest::Client, url: &str, name: &str) -> String {
    let path = url.strip_prefix(&app.address).unwrap();
    if browser.get(url).send().await.unwrap().status() == 303 {
        assert_eq!(app.sign_in(browser, name, path).await.status(), 303);
    }
    let page = browser.get(url).send().await.unwrap();
    assert_eq!(page.status(), 200, "the key page");
    page.text().await.unwrap()
}

async fn submit_key(browser: &reqwest::Client, url: &str, csrf: &str, key: &str) -> reqwest::Response {
    browser.post(url).form(&[("csrf_token", csrf), ("action", "connect_key"), ("api_key", key)]).send().await.unwrap()
}

/// Connects `name`'s key through the page (plain HTTP); returns the MCP client that asked.
async fn connect_with_key(app: &TestApp, name: &str, key: &str) -> McpClient {
    let client = app.mcp_client(name, ClientKind::Url).await;
    let url = connect_link(&client).await;
    let browser = app.browser();
    let html = key_page(app, &browser, &url, name).await;
    let csrf = hidden_field(&html, "csrf_token").unwrap();
    let done = submit_key(&browser, &url, &csrf, key).await;
    assert_eq!(done.status(), 303, "a good key completes the connect");
    assert_eq!(location(&done), format!("{}/result", url.strip_prefix(&app.address).unwrap()));
    client
}

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    serde_json::to_string(&result.content).unwrap()
}

/// Every text a grant, the audit log and the authorizations hold, as the database has them.
async fn database_text(app: &TestApp) -> String {
    use sqlx::Row;
    let pool = app.state.core.store.pool();
    let mut all = String::new();
    for row in
        sqlx::query("SELECT access_token_sealed, account_label, scopes FROM grants").fetch_all(pool).await.unwrap()
    {
        all.push_str(&String::from_utf8_lossy(&row.get::<Vec<u8>, _>(0)));
        all.push_str(&row.get::<Option<String>, _>(1).unwrap_or_default());
        all.push_str(&row.get::<String, _>(2));
    }
    for row in sqlx::query("SELECT action, detail FROM audit_log").fetch_all(pool).await.unwrap() {
        all.push_str(&row.get::<String, _>(0));
        all.push_str(&row.get::<Option<String>, _>(1).unwrap_or_default());
    }
    for row in sqlx::query("SELECT id, provider, failure FROM authorizations").fetch_all(pool).await.unwrap() {
        all.push_str(&row.get::<String, _>(0));
        all.push_str(&row.get::<Option<String>, _>(2).unwrap_or_default());
    }
    all
}

async fn grant_count(app: &TestApp) -> usize {
    app.state.core.store.grants().for_user(&app.user_id(ALICE).await).await.unwrap().len()
}

with_keys_on_both_backends!(
    a_key_entered_on_the_connect_page_is_used_by_provider_request_the_proxy_and_the_token_api,
    key_used_by_every_face
);
async fn key_used_by_every_face(app: &TestApp) {
    let key = demo_key(app, "alice-keys").await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let url = connect_link(&client).await;
    let browser = app.browser();
    let html = key_page(app, &browser, &url, ALICE).await;
    // A password field with autocomplete off, the link to make a key, the format hint.
    assert!(html.contains(r#"type="password" id="api_key" name="api_key" autocomplete="off""#), "{html}");
    assert!(html.contains(&app.url("/demo-provider/keys")), "links where keys are made");
    assert!(html.contains("demo_sk_"), "says how keys begin");
    let csrf = hidden_field(&html, "csrf_token").unwrap();
    let done = submit_key(&browser, &url, &csrf, &key).await;
    assert_eq!(done.status(), 303);
    let result = browser.get(app.url(&location(&done))).send().await.unwrap().text().await.unwrap();
    assert!(result.contains("Connected to Demo Provider (API key)"), "{result}");
    assert!(!result.contains(&key));

    // provider_request: the key goes in X-Demo-Key, the demo API names its account.
    let answer = client.call("provider_request", me()).await.unwrap();
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
    assert!(text_of(&answer).contains("alice-keys"), "{answer:?}");
    // An echo shows no key back to the client (redacted like a token).
    let echo = json!({"provider": PROVIDER, "method": "GET", "path": "/echo", "query": {"echo": key}});
    if let Ok(echoed) = client.call("provider_request", echo).await {
        assert!(!text_of(&echoed).contains(&key), "the key never reaches the client: {echoed:?}");
    }

    // The token API: the service is allowed on the same consent page, then gets the key.
    let service =
        register_service(app, "keys", &[PROVIDER], ServiceOptions { resource: Some(RESOURCE), ..Default::default() })
            .await;
    let subject = user_token_for(app, ALICE, RESOURCE).await;
    let ask = || {
        app.http()
            .post(app.url("/v1/tokens"))
            .basic_auth(&service.client_id, Some(&service.secret))
            .json(&json!({"subject_token": subject, "provider": PROVIDER}))
            .send()
    };
    let first = ask().await.unwrap();
    assert_eq!(first.status(), StatusCode::CONFLICT);
    let problem: Value = first.json().await.unwrap();
    assert_eq!(problem["reason"], "consent_required", "{problem}");
    app.allow_in_browser(&browser, problem["authorization"]["url"].as_str().unwrap(), ALICE).await;
    let issued = ask().await.unwrap();
    assert_eq!(issued.status(), 200);
    let body: Value = issued.json().await.unwrap();
    assert_eq!(body["access_token"], key.as_str());
    assert_eq!(body["token_type"], "api_key");
    assert_eq!(body["send_as"]["header"], "x-demo-key");
    assert_eq!(body["account"], "alice-keys");

    // The proxy: the broker sends the key itself.
    let proxied = app
        .http()
        .get(app.url(&format!("/v1/proxy/{PROVIDER}/me")))
        .basic_auth(&service.client_id, Some(&service.secret))
        .header("x-subject-token", &subject)
        .send()
        .await
        .unwrap();
    assert_eq!(proxied.status(), 200);
    let body: Value = proxied.json().await.unwrap();
    assert_eq!(body["account"], "alice-keys");

    // Never shown again: My connections has its last four characters only.
    let mine = browser.get(app.url("/connections")).send().await.unwrap().text().await.unwrap();
    assert!(mine.contains(&format!("…{}", &key[key.len() - 4..])), "{mine}");
    assert!(!mine.contains(&key));
    // The database holds it sealed only, the audit log never.
    let stored = database_text(app).await;
    assert!(!stored.contains(&key) && !stored.contains(&key[8..]), "the key is in the database in clear");
    let audit = stored.contains("authorization.completed");
    assert!(audit, "the connect is audited");
    client.close().await;
}

with_keys_on_both_backends!(a_wrong_key_is_refused_on_the_page_with_the_providers_reason, wrong_key_refused);
async fn wrong_key_refused(app: &TestApp) {
    let revoked = demo_key(app, "alice-keys").await;
    revoke_demo_key(app, &revoked).await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let url = connect_link(&client).await;
    let browser = app.browser();
    let html = key_page(app, &browser, &url, ALICE).await;
    let csrf = hidden_field(&html, "csrf_token").unwrap();
    for (key, reason) in [
        ("demo_sk_never-issued-by-anyone-0123456789", "No such key: it was never issued by the Demo Provider."),
        ("sk-not-a-demo-key-at-all", "This is not a Demo Provider key: they start with demo_sk_."),
        (revoked.as_str(), "This key was revoked; create a new one"),
        ("two words", "That is not a key"),
    ] {
        let refused = submit_key(&browser, &url, &csrf, key).await;
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST, "{key}");
        let page = refused.text().await.unwrap();
        assert!(page.contains(reason), "{key}: the provider's reason is on the page: {page}");
        assert!(page.contains("Nothing was stored"), "{page}");
        assert!(!page.contains(key), "the refused key is not put back into the page");
        assert_eq!(grant_count(app).await, 0, "nothing stored for {key}");
    }
    // The link is still open: the right key connects.
    let good = demo_key(app, "alice-keys").await;
    assert_eq!(submit_key(&browser, &url, &csrf, &good).await.status(), 303);
    assert_eq!(grant_count(app).await, 1);
    client.close().await;
}

with_keys_on_both_backends!(another_users_browser_cannot_submit_the_key_form, other_browser_refused);
async fn other_browser_refused(app: &TestApp) {
    let key = demo_key(app, "bob-keys").await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let url = connect_link(&client).await;
    // Bob, signed in on his own browser, with his own valid CSRF token, opens Alice's link.
    let bobs = app.browser();
    let path = url.strip_prefix(&app.address).unwrap();
    assert_eq!(app.sign_in(&bobs, BOB, path).await.status(), 303);
    let shown = bobs.get(&url).send().await.unwrap();
    assert_eq!(shown.status(), StatusCode::FORBIDDEN);
    let html = shown.text().await.unwrap();
    assert!(!html.contains("name=\"api_key\""), "no key form for another account");
    let home = bobs.get(app.url("/")).send().await.unwrap().text().await.unwrap();
    let csrf = hidden_field(&home, "csrf_token").expect("a signed-in page carries the session's token");
    let refused = submit_key(&bobs, &url, &csrf, &key).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert!(refused.text().await.unwrap().contains("Wrong account"));
    assert_eq!(grant_count(app).await, 0);
    assert!(app.state.core.store.grants().for_user(&app.user_id(BOB).await).await.unwrap().is_empty());
    client.close().await;
}

with_keys_on_both_backends!(a_key_form_without_its_csrf_token_is_refused, csrf_refused);
async fn csrf_refused(app: &TestApp) {
    let key = demo_key(app, "alice-keys").await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let url = connect_link(&client).await;
    let browser = app.browser();
    key_page(app, &browser, &url, ALICE).await;
    let missing =
        browser.post(&url).form(&[("action", "connect_key"), ("api_key", key.as_str())]).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::FORBIDDEN);
    let wrong = submit_key(&browser, &url, "not-the-token", &key).await;
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
    assert_eq!(grant_count(app).await, 0);
    // Replacing a key on My connections needs it too.
    let grant_less = browser
        .post(app.url("/connections/key"))
        .form(&[("grant_id", "anything"), ("api_key", key.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(grant_less.status(), StatusCode::FORBIDDEN);
    client.close().await;
}

with_keys_on_both_backends!(a_key_is_replaced_and_removed_on_my_connections, replace_and_remove);
async fn replace_and_remove(app: &TestApp) {
    let first = demo_key(app, "alice-keys").await;
    let client = connect_with_key(app, ALICE, &first).await;
    let browser = app.browser();
    assert_eq!(app.sign_in(&browser, ALICE, "/connections").await.status(), 303);
    let page = browser.get(app.url("/connections")).send().await.unwrap().text().await.unwrap();
    let csrf = hidden_field(&page, "csrf_token").unwrap();
    let grant_id = hidden_field(&page, "grant_id").unwrap();
    let replace = |key: String| {
        let form = [("csrf_token", csrf.clone()), ("grant_id", grant_id.clone()), ("api_key", key)];
        browser.post(app.url("/connections/key")).form(&form).send()
    };
    // A wrong key is refused with the provider's reason; the first key stays in use.
    let refused = replace("demo_sk_never-issued-0123456789".into()).await.unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    assert!(refused.text().await.unwrap().contains("No such key"));
    assert!(text_of(&client.call("provider_request", me()).await.unwrap()).contains("alice-keys"));

    // A new key replaces it: with the first one revoked at the provider, calls still work.
    let second = demo_key(app, "alice-keys").await;
    assert_eq!(replace(second.clone()).await.unwrap().status(), 303);
    revoke_demo_key(app, &first).await;
    let answer = client.call("provider_request", me()).await.unwrap();
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
    assert_eq!(grant_count(app).await, 1, "replaced, not added");
    let page = browser.get(app.url("/connections")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains(&format!("…{}", &second[second.len() - 4..])));

    // Removing it: the grant is gone and the next call asks for a key again.
    let removed = browser
        .post(app.url("/connections/revoke"))
        .form(&[("csrf_token", csrf.as_str()), ("grant_id", grant_id.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), 303);
    assert_eq!(grant_count(app).await, 0);
    connect_link(&client).await;
    client.close().await;
}

with_keys_on_both_backends!(
    a_key_the_provider_stops_accepting_makes_the_connection_ask_for_a_new_one_without_a_refresh,
    rejected_key_needs_new_one
);
async fn rejected_key_needs_new_one(app: &TestApp) {
    let key = demo_key(app, "alice-keys").await;
    let client = connect_with_key(app, ALICE, &key).await;
    revoke_demo_key(app, &key).await;
    // The call that meets the 401 marks the connection and gets the link itself (not the
    // provider's raw 401); the next one gets it too.
    let first = connect_link(&client).await;
    let grants = app.state.core.store.grants().for_user(&app.user_id(ALICE).await).await.unwrap();
    assert_eq!(grants[0].status, oauth_broker::store::grants::GrantStatus::NeedsReconsent);
    assert!(first.contains("/connect/"), "{first}");
    let url = connect_link(&client).await;
    // The same page takes the new key, and the connection works again.
    let browser = app.browser();
    let html = key_page(app, &browser, &url, ALICE).await;
    let fresh = demo_key(app, "alice-keys").await;
    let csrf = hidden_field(&html, "csrf_token").unwrap();
    assert_eq!(submit_key(&browser, &url, &csrf, &fresh).await.status(), 303);
    let answer = client.call("provider_request", me()).await.unwrap();
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
    client.close().await;
}

/// Log lines written on this thread (the test's runtime is single-threaded, so the server's
/// too), to look for the key in.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_key_never_appears_in_a_log_line_even_at_trace_level() {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let app = spawn(Backend::Sqlite).await.unwrap();
    let wrong = "demo_sk_wrong-key-for-the-log-test-0123456789";
    let key = demo_key(&app, "alice-keys").await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let url = connect_link(&client).await;
    let browser = app.browser();
    let html = key_page(&app, &browser, &url, ALICE).await;
    let csrf = hidden_field(&html, "csrf_token").unwrap();
    assert_eq!(submit_key(&browser, &url, &csrf, wrong).await.status(), 400);
    assert_eq!(submit_key(&browser, &url, &csrf, &key).await.status(), 303);
    client.call("provider_request", me()).await.unwrap();
    revoke_demo_key(&app, &key).await;
    let _ = client.call("provider_request", me()).await;
    client.close().await;
    app.stop().await;
    let logged = String::from_utf8_lossy(&lines.0.lock().unwrap()).into_owned();
    assert!(logged.contains("authorization completed with an API key"), "the log was captured: {logged}");
    for secret in [key.as_str(), wrong] {
        assert!(!logged.contains(secret) && !logged.contains(&secret[8..]), "a key in the logs");
    }
}

async fn key_connection_in_a_real_browser(backend: Backend) {
    let Some(browser) = crate::helpers::browser::Browser::start(crate::helpers::browser::PHONE).await else { return };
    let Some(app) = spawn(backend).await else { return browser.close().await };
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let url = connect_link(&client).await;
    let path = url.strip_prefix(&app.address).unwrap().to_owned();
    // The user makes a key at the provider, in the browser, and copies it from the page.
    browser.open(&app.url("/demo-provider/keys")).await;
    browser.client.find(Locator::Id("account")).await.unwrap().send_keys("alice-browser").await.unwrap();
    browser.click("#create-key").await;
    let key = browser.client.wait().for_element(Locator::Id("api-key")).await.unwrap().text().await.unwrap();
    // Then opens the link, signs in, pastes it.
    browser.sign_in(&app, ALICE, &path).await;
    let field = browser.client.find(Locator::Id("api_key")).await.unwrap();
    assert_eq!(field.attr("autocomplete").await.unwrap().as_deref(), Some("off"));
    assert_eq!(field.attr("type").await.unwrap().as_deref(), Some("password"));
    field.send_keys("demo_sk_not-the-right-one-0123456789").await.unwrap();
    browser.click("button[value=connect_key]").await;
    let error = browser.client.wait().for_element(Locator::Id("key-error")).await.unwrap().text().await.unwrap();
    assert!(error.contains("No such key"), "{error}");
    assert_eq!(browser.sideways_overflow().await, Vec::<String>::new(), "the key page on a phone");
    browser.client.find(Locator::Id("api_key")).await.unwrap().send_keys(&key).await.unwrap();
    browser.click("button[value=connect_key]").await;
    browser.wait_for_url(&app.url(&format!("{path}/result"))).await;
    assert!(browser.text().await.contains("Connected to Demo Provider (API key)"));
    let answer = client.call("provider_request", me()).await.unwrap();
    assert!(text_of(&answer).contains("alice-browser"), "{answer:?}");
    client.close().await;
    browser.close().await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_connection_made_in_a_real_browser_is_used_by_provider_request_sqlite() {
    key_connection_in_a_real_browser(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_connection_made_in_a_real_browser_is_used_by_provider_request_postgres() {
    key_connection_in_a_real_browser(Backend::Postgres).await;
}
