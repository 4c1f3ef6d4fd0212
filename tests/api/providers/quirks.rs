//! Real providers' quirks end to end (issue 12): the catalogue's GitHub entry against a
//! provider that answers as GitHub does, the mix-up defence of one callback per provider,
//! scopes a provider does not offer, and accounts by the provider's stable id.

use std::sync::Arc;

use rmcp::ServiceError;
use serde_json::json;

use oauth_broker::domain::Scopes;
use oauth_broker::store::authorizations::AuthorizationStatus;

use crate::helpers::quirky_provider::{Answer, QuirkyProvider};
use crate::helpers::{ALICE, Backend, ClientKind, McpClient, SpawnOptions, TestApp, location, spawn_app_opts};

/// Tests that run once on each backend.
macro_rules! both {
    ($body:ident) => {
        mod $body {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$body(crate::helpers::Backend::Sqlite).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$body(crate::helpers::Backend::Postgres).await;
            }
        }
    };
}

async fn spawn(backend: Backend, toml: String) -> Option<TestApp> {
    spawn_app_opts(backend, SpawnOptions { toml, ..Default::default() }, |b| b).await
}

async fn call(
    client: &McpClient,
    tool: &str,
    args: serde_json::Value,
) -> Result<rmcp::model::CallToolResult, ServiceError> {
    client.call(tool, args).await
}

/// Walks the browser from a connect link to the provider and back: returns the callback URL
/// the provider sent the browser to (not yet followed) and the browser.
async fn to_callback(app: &TestApp, connect_url: &str) -> (String, reqwest::Client) {
    let browser = app.browser();
    let path = connect_url.strip_prefix(&app.address).expect("connect URL is ours").to_owned();
    if browser.get(connect_url).send().await.unwrap().status() == 303 {
        assert_eq!(app.sign_in(&browser, ALICE, &path).await.status(), 303);
    }
    let html = browser.get(connect_url).send().await.unwrap().text().await.unwrap();
    let csrf = crate::helpers::hidden_field(&html, "csrf_token").expect("consent form");
    let approved =
        browser.post(connect_url).form(&[("csrf_token", csrf.as_str()), ("action", "approve")]).send().await.unwrap();
    assert_eq!(approved.status(), 303, "approve redirects to the provider");
    let at_provider = browser.get(location(&approved)).send().await.unwrap();
    (location(&at_provider), browser)
}

/// The connect link a tool call on `provider` answers with (`-32042`).
async fn connect_link(client: &McpClient, provider: &str) -> String {
    let error =
        match call(client, "provider_request", json!({"provider": provider, "method": "GET", "path": "/whoami"})).await
        {
            Err(ServiceError::McpError(e)) => e,
            other => panic!("expected -32042, got {other:?}"),
        };
    assert_eq!(error.code.0, -32042);
    error.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned()
}

/// Connects ALICE's `provider` account through the browser; the callback's final answer.
async fn connect(app: &TestApp, client: &McpClient, provider: &str) -> reqwest::Response {
    let link = connect_link(client, provider).await;
    let (callback, browser) = to_callback(app, &link).await;
    assert!(callback.starts_with(&app.url(&format!("/oauth/callback/{provider}?"))), "{callback}");
    browser.get(&callback).send().await.unwrap()
}

fn scopes(list: &[&str]) -> Scopes {
    Scopes::parse(list).unwrap()
}

// ---- the GitHub story ----

async fn a_github_style_answer_connects_once_with_both_scopes_and_does_not_loop(backend: Backend) {
    // Arrange: GitHub from the catalogue, answering form-encoded `scope=repo,gist`, no `iss`.
    let github = QuirkyProvider::start(Answer::GithubForm).await;
    let Some(app) = spawn(backend, github.toml("github", "")).await else { return };
    let client = app.mcp_client(ALICE, ClientKind::Url).await;

    // Act: connect through the browser.
    let landed = connect(&app, &client, "github").await;

    // Assert: one grant with the two scopes, for the numeric id, labelled with the login.
    assert_eq!(landed.status(), 303, "the callback lands on a clean page");
    assert!(location(&landed).ends_with("/result"), "{}", location(&landed));
    let grant = app
        .state
        .core
        .store
        .grants()
        .latest(&app.user_id(ALICE).await, "github", None)
        .await
        .unwrap()
        .expect("connected");
    assert_eq!(grant.scopes, scopes(&["repo", "gist"]));
    assert_eq!(grant.account_label.as_deref(), Some("octocat"));
    let (account_id, _) = app.state.core.store.grants().account(&grant.id).await.unwrap().unwrap();
    assert_eq!(account_id, "4242");
    // The client that connected may use it, and list_connections says so.
    let listed = call(&client, "list_connections", json!({})).await.unwrap().structured_content.unwrap();
    let entry = listed["connections"].as_array().unwrap().iter().find(|c| c["provider"] == "github").unwrap().clone();
    assert_eq!(entry["allowed_for_this_client"], true, "{entry}");
    assert_eq!(entry["scopes"], json!(["gist", "repo"]), "{entry}");
    // connect_account for a scope it holds answers at once: no new link, no loop.
    let again = call(&client, "connect_account", json!({"provider": "github", "scopes": ["repo"]})).await.unwrap();
    assert_ne!(again.is_error, Some(true), "{again:?}");
    let whoami = call(&client, "provider_request", json!({"provider": "github", "method": "GET", "path": "/whoami"}))
        .await
        .unwrap();
    assert_eq!(whoami.structured_content.unwrap()["status"], 200);
    assert_eq!(github.token_requests(), 1, "one code exchange, nothing more");
    app.stop().await;
}
both!(a_github_style_answer_connects_once_with_both_scopes_and_does_not_loop);

// ---- mix-up defence ----

async fn a_response_at_another_providers_callback_is_refused_before_any_token_request(backend: Backend) {
    // Arrange: two providers without `iss`, each with its own callback.
    let github = QuirkyProvider::start(Answer::GithubForm).await;
    let other = QuirkyProvider::start(Answer::GithubForm).await;
    let toml = format!("{}{}", github.toml("github", ""), other.toml("other", ""));
    let Some(app) = spawn(backend, toml).await else { return };
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let link = connect_link(&client, "github").await;
    let (callback, browser) = to_callback(&app, &link).await;
    let query = callback.split_once('?').unwrap().1.to_owned();

    // Act: the response is delivered at the other provider's callback, and at the shared one.
    for wrong in [
        format!("/oauth/callback/other?{query}"),
        format!("/oauth/callback?{query}"),
        format!("/oauth/callback/nope?{query}"),
    ] {
        let landed = browser.get(app.url(&wrong)).send().await.unwrap();
        // Assert: refused, and no provider was asked for a token.
        assert_eq!(location(&landed), "/oauth/callback/problem/wrong-callback", "{wrong}");
    }
    assert_eq!((github.token_requests(), other.token_requests()), (0, 0), "no token request was made");
    let page = browser.get(app.url("/oauth/callback/problem/wrong-callback")).send().await.unwrap();
    assert_eq!(page.status(), 400);
    assert!(page.text().await.unwrap().contains("another provider"));
    // The attempt is still open: the genuine response completes it.
    let landed = browser.get(&callback).send().await.unwrap();
    assert!(location(&landed).ends_with("/result"), "{}", location(&landed));
    assert_eq!(github.token_requests(), 1);
    assert!(app.state.core.store.grants().latest(&app.user_id(ALICE).await, "github", None).await.unwrap().is_some());
    app.stop().await;
}
both!(a_response_at_another_providers_callback_is_refused_before_any_token_request);

// ---- scopes the provider does not offer ----

async fn scopes_the_provider_does_not_offer_are_refused_with_invalid_params_before_anything_is_sent(backend: Backend) {
    let github = QuirkyProvider::start(Answer::GithubForm).await;
    let Some(app) = spawn(backend, github.toml("github", "")).await else { return };
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let before = app.state.core.store.authorizations().all(100).await.unwrap().len();
    let made_up: Vec<String> = (0..1000).map(|i| format!("made-up:{i}")).collect();
    for asked in
        [json!(["repo", "read&redirect_uri=https://evil.example/cb"]), json!(["admin:everything"]), json!(made_up)]
    {
        let error = match call(&client, "connect_account", json!({"provider": "github", "scopes": asked})).await {
            Err(ServiceError::McpError(e)) => e,
            other => panic!("expected -32602 for {asked}, got {other:?}"),
        };
        assert_eq!(error.code.0, -32602, "{asked}: {error:?}");
        assert!(error.message.contains("scope"), "{}", error.message);
    }
    // The demo provider's list is its own.
    let demo = call(&client, "connect_account", json!({"provider": "demo", "scopes": ["repo"]})).await;
    assert!(matches!(demo, Err(ServiceError::McpError(ref e)) if e.code.0 == -32602), "{demo:?}");
    assert_eq!(
        app.state.core.store.authorizations().all(100).await.unwrap().len(),
        before,
        "no authorization was opened"
    );
    assert_eq!(github.token_requests(), 0);
    app.stop().await;
}
both!(scopes_the_provider_does_not_offer_are_refused_with_invalid_params_before_anything_is_sent);

async fn an_operator_may_open_a_providers_scopes(backend: Backend) {
    let github = QuirkyProvider::start(Answer::GithubForm).await;
    let Some(app) = spawn(backend, github.toml("github", "open_scopes = true")).await else { return };
    let client = app.mcp_client(ALICE, ClientKind::NoElicitation).await;
    let answer =
        call(&client, "connect_account", json!({"provider": "github", "scopes": ["admin:org"]})).await.unwrap();
    assert_eq!(answer.is_error, Some(true), "not connected yet: the link as text");
    let rows = app.state.core.store.authorizations().all(100).await.unwrap();
    assert!(rows.iter().any(|r| r.scopes.contains("admin:org")), "the open scope was asked for");
    app.stop().await;
}
both!(an_operator_may_open_a_providers_scopes);

// ---- accounts ----

async fn a_renamed_login_keeps_its_grant_and_the_label_follows(backend: Backend) {
    let github = QuirkyProvider::start(Answer::GithubForm).await;
    let Some(app) = spawn(backend, github.toml("github", "")).await else { return };
    let client = Arc::new(app.mcp_client(ALICE, ClientKind::Url).await);
    connect(&app, &client, "github").await;
    let user = app.user_id(ALICE).await;
    let first = app.state.core.store.grants().latest(&user, "github", None).await.unwrap().unwrap();

    // Act: the account is renamed at GitHub, and the user connects "another" account — which
    // the provider says is the same one.
    github.rename("octocat-renamed");
    let pending = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .call(
                    "connect_account",
                    json!({"provider": "github", "account": "someone-else", "scopes": ["repo", "gist"]}),
                )
                .await
        }
    });
    let (url, _) = client.next_url_elicitation().await;
    let (callback, browser) = to_callback(&app, &url).await;
    browser.get(&callback).send().await.unwrap();
    pending.await.unwrap().unwrap();

    // Assert: still one grant, the same row, under the new name.
    let grants = app.state.core.store.grants().at(&user, "github").await.unwrap();
    assert_eq!(grants.len(), 1, "{:?}", grants.iter().map(|g| &g.account_label).collect::<Vec<_>>());
    assert_eq!(grants[0].id, first.id);
    assert_eq!(grants[0].account_label.as_deref(), Some("octocat-renamed"));
    app.stop().await;
}
both!(a_renamed_login_keeps_its_grant_and_the_label_follows);

async fn a_failed_identity_lookup_is_reported_not_stored_as_an_empty_account(backend: Backend) {
    let github = QuirkyProvider::start(Answer::GithubForm).await;
    let Some(app) = spawn(backend, github.toml("github", "")).await else { return };
    github.fail_identity();
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let landed = connect(&app, &client, "github").await;
    assert!(location(&landed).ends_with("/result"), "the owner is told on the result page");
    let rows = app.state.core.store.authorizations().all(100).await.unwrap();
    let row = rows.iter().find(|r| r.provider == "github").unwrap();
    assert_eq!(row.status, AuthorizationStatus::Failed);
    assert_eq!(row.failure.as_deref(), Some("exchange_failed:identity_lookup_failed"));
    assert!(
        app.state.core.store.grants().latest(&app.user_id(ALICE).await, "github", None).await.unwrap().is_none(),
        "nothing stored"
    );
    app.stop().await;
}
both!(a_failed_identity_lookup_is_reported_not_stored_as_an_empty_account);

// ---- token-answer quirks ----

async fn slack_v2_nested_user_tokens_and_errors_with_http_200(backend: Backend) {
    let slack = QuirkyProvider::start(Answer::SlackNested).await;
    let broken = QuirkyProvider::start(Answer::ErrorWith200).await;
    let toml = format!(
        "{}{}",
        slack.toml("slack", "token_path = \"authed_user\"\nscope_param = \"user_scope\"\nscope_separator = \",\""),
        broken.toml("broken", "")
    );
    let Some(app) = spawn(backend, toml).await else { return };
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    // Slack: the user token from authed_user, with its comma-separated scopes.
    let link = connect_link(&client, "slack").await;
    let (callback, browser) = to_callback(&app, &link).await;
    browser.get(&callback).send().await.unwrap();
    let user = app.user_id(ALICE).await;
    let grant = app.state.core.store.grants().latest(&user, "slack", None).await.unwrap().expect("connected");
    assert_eq!(grant.scopes, scopes(&["repo", "gist"]));
    // An error with HTTP 200 fails the attempt with its code.
    connect(&app, &client, "broken").await;
    let rows = app.state.core.store.authorizations().all(100).await.unwrap();
    let row = rows.iter().find(|r| r.provider == "broken").unwrap();
    assert_eq!(row.failure.as_deref(), Some("exchange_failed:invalid_grant"));
    assert!(app.state.core.store.grants().latest(&user, "broken", None).await.unwrap().is_none());
    app.stop().await;
}
both!(slack_v2_nested_user_tokens_and_errors_with_http_200);

async fn salesforce_instance_url_is_the_grants_api_base(backend: Backend) {
    let sf = QuirkyProvider::start(Answer::SalesforceInstance).await;
    let extra = "api_base_from_token = \"instance_url\"\napi_base_domains = [\"localhost\"]";
    let Some(app) = spawn(backend, sf.toml("sf", extra)).await else { return };
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    connect(&app, &client, "sf").await;
    let answer =
        call(&client, "provider_request", json!({"provider": "sf", "method": "GET", "path": "/whoami"})).await.unwrap();
    let body = answer.structured_content.unwrap();
    assert_eq!(body["status"], 200, "{body}");
    let expected_host = sf.instance_url().trim_start_matches("http://").to_owned();
    assert_eq!(body["body"]["host"], expected_host.as_str(), "called under instance_url, not the configured base");
    app.stop().await;
}
both!(salesforce_instance_url_is_the_grants_api_base);
