//! Issue 27: one connection status, computed in the core, that every face tells the same way —
//! `GET /v1/connections` for services (and its attempts to break it), `list_connections`, the
//! connections page with its Reconnect button; the calls in flight when a provider revokes a
//! grant get the reconnect link instead of the provider's 401; and the token API's caller
//! mistakes (`X-Account: zürich`, a body on HEAD, an undecodable path) are 400s naming them.
//! Against the strict provider (rotating refresh tokens), on SQLite and PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use rmcp::ServiceError;
use serde_json::{Value, json};

use oauth_broker::store::grants::{GrantStatus, RefreshFailure};

use crate::helpers::strict_provider::{StrictProvider, connect_strict, me, spawn};
use crate::helpers::token_api::{ServiceCredentials, ServiceOptions, register_service, user_token_for};
use crate::helpers::{ALICE, Backend, TestApp};

const RESOURCE: &str = "https://status-tool.example/mcp";

/// Runs `$body(Backend)` as one test per backend.
macro_rules! on_both {
    ($name:ident, $body:ident) => {
        mod $name {
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

/// `GET /v1/connections` as `service`, with `headers` and `query`.
async fn listing(
    app: &TestApp,
    service: &ServiceCredentials,
    headers: &[(&str, &str)],
    query: &str,
) -> (StatusCode, String) {
    let mut request = app
        .http()
        .get(app.url(&format!("/v1/connections{query}")))
        .basic_auth(&service.client_id, Some(&service.secret));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    (response.status(), response.text().await.unwrap())
}

fn entry<'a>(body: &'a Value, provider: &str) -> &'a Value {
    body["connections"].as_array().unwrap().iter().find(|c| c["provider"] == provider).unwrap_or(&Value::Null)
}

fn providers_listed(body: &Value) -> Vec<String> {
    body["connections"].as_array().unwrap().iter().map(|c| c["provider"].as_str().unwrap().to_owned()).collect()
}

/// A `/v1/tokens` request: status and body.
async fn token(app: &TestApp, service: &ServiceCredentials, body: Value) -> (StatusCode, Value) {
    let response = app
        .http()
        .post(app.url("/v1/tokens"))
        .basic_auth(&service.client_id, Some(&service.secret))
        .json(&body)
        .send()
        .await
        .unwrap();
    (response.status(), response.json().await.unwrap_or(Value::Null))
}

async fn the_status_api_tells_a_service_where_each_connection_stands(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    let service = register_service(
        &app,
        "status",
        &["strict"],
        ServiceOptions { resource: Some(RESOURCE), ..Default::default() },
    )
    .await;
    let subject = user_token_for(&app, ALICE, RESOURCE).await;
    let as_alice = [("x-subject-token", subject.as_str())];

    // Not connected yet: the one provider this service may use, and only it (demo is
    // configured too, but not given to this service).
    let (status, text) = listing(&app, &service, &as_alice, "").await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(providers_listed(&body), ["strict"]);
    assert_eq!(entry(&body, "strict")["status"], "not_connected");

    // Connected through an MCP client: this service is not allowed to use it yet.
    let client = connect_strict(&app).await;
    let (_, text) = listing(&app, &service, &as_alice, "").await;
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(entry(&body, "strict")["status"], "consent_required", "{body}");
    let (status, problem) = token(&app, &service, json!({"subject_token": subject, "provider": "strict"})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    app.allow_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;
    let (status, issued) = token(&app, &service, json!({"subject_token": subject, "provider": "strict"})).await;
    assert_eq!(status, StatusCode::OK, "{issued}");
    let access_token = issued["access_token"].as_str().unwrap().to_owned();

    let (_, text) = listing(&app, &service, &as_alice, "").await;
    let body: Value = serde_json::from_str(&text).unwrap();
    let strict = entry(&body, "strict");
    assert_eq!(strict["status"], "ready", "{body}");
    assert_eq!(strict["scopes"], json!(["read"]));
    assert!(strict["expires_at"].as_i64().unwrap() > app.now());
    assert!(!text.contains(&access_token), "never a token: {text}");

    // Relative to what the service needs.
    let (_, text) = listing(&app, &service, &as_alice, "?scopes=read%20write").await;
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(entry(&body, "strict")["status"], "missing_scopes");
    assert_eq!(entry(&body, "strict")["missing_scopes"], json!(["write"]));

    // A failing refresh: the kind and when it is tried again, the same on every face.
    app.clock.advance(3601);
    provider.fail_next_refreshes(1, 503, Some(20));
    let (status, _) = token(&app, &service, json!({"subject_token": subject, "provider": "strict"})).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let (_, text) = listing(&app, &service, &as_alice, "").await;
    let body: Value = serde_json::from_str(&text).unwrap();
    let strict = entry(&body, "strict");
    assert_eq!(strict["status"], "refresh_failing", "{body}");
    assert_eq!(strict["last_refresh_error"], "server_error");
    assert_eq!(strict["next_refresh_at"].as_i64(), Some(app.now() + 20));

    let listed = client.call("list_connections", json!({})).await.unwrap().structured_content.unwrap();
    let mcp = listed["connections"].as_array().unwrap().iter().find(|c| c["provider"] == "strict").unwrap();
    assert_eq!((mcp["status"].as_str(), mcp["state"].as_str()), (Some("connected"), Some("refresh_failing")));
    assert_eq!(mcp["last_refresh_error"], "server_error");
    assert_eq!(mcp["next_refresh_at"], strict["next_refresh_at"]);

    // The user sees it on the connections page, with a way to reconnect.
    let browser = app.browser();
    app.sign_in(&browser, ALICE, "/connections").await;
    let page = browser.get(app.url("/connections")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("refresh failing (server_error)"), "{page}");
    assert!(page.contains("data-status=\"refresh_failing\""));
    assert!(page.contains("action=\"/connections/reconnect\""), "a Reconnect button");
    let csrf = crate::helpers::hidden_field(&page, "csrf_token").unwrap();
    let grant = app.state.core.store.grants().latest(&app.user_id(ALICE).await, "strict", None).await.unwrap().unwrap();
    let reconnect = browser
        .post(app.url("/connections/reconnect"))
        .form(&[("csrf_token", csrf.as_str()), ("grant_id", grant.id.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(reconnect.status(), 303);
    let to = crate::helpers::location(&reconnect);
    assert!(to.starts_with("/connect/"), "to the broker's own connect page: {to}");
    let connect_page = browser.get(app.url(&to)).send().await.unwrap();
    assert_eq!(connect_page.status(), 200, "the same user may open it");
    // Without the CSRF token, or for a grant that is not hers, nothing is opened.
    let forged = browser.post(app.url("/connections/reconnect")).form(&[("grant_id", grant.id.as_str())]).send().await;
    assert_ne!(forged.unwrap().status(), 303);
    let not_hers = browser
        .post(app.url("/connections/reconnect"))
        .form(&[("csrf_token", csrf.as_str()), ("grant_id", "g_not_hers")])
        .send()
        .await
        .unwrap();
    assert_eq!(not_hers.status(), 404);
    app.stop().await;
}
on_both!(status_api, the_status_api_tells_a_service_where_each_connection_stands);

async fn the_status_api_refuses_what_would_leak_another_users_or_services_connections(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    connect_strict(&app).await;
    let untrusted = register_service(
        &app,
        "untrusted",
        &["strict"],
        ServiceOptions { resource: Some(RESOURCE), ..Default::default() },
    )
    .await;
    let demo_only = register_service(
        &app,
        "demo-only",
        &["demo"],
        ServiceOptions { resource: Some(RESOURCE), ..Default::default() },
    )
    .await;
    let trusted =
        register_service(&app, "trusted", &["strict"], ServiceOptions { trusted: true, ..Default::default() }).await;
    let subject = user_token_for(&app, ALICE, RESOURCE).await;
    let user = app.user_id(ALICE).await;

    // Another service's providers are not listed, and cannot be asked for.
    let (status, text) = listing(&app, &demo_only, &[("x-subject-token", &subject)], "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(providers_listed(&serde_json::from_str(&text).unwrap()), ["demo"]);
    let (status, text) = listing(&app, &demo_only, &[("x-subject-token", &subject)], "?provider=strict").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{text}");

    // An untrusted service cannot name a user, by query or by header.
    let (status, text) = listing(&app, &untrusted, &[], &format!("?user_id={user}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{text}");
    let (status, _) = listing(&app, &untrusted, &[("x-user-id", &user)], "").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A trusted one can.
    let (status, text) = listing(&app, &trusted, &[], &format!("?user_id={user}")).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(entry(&serde_json::from_str(&text).unwrap(), "strict")["status"], "consent_required");

    // A token for another audience, a token in the URL, no user at all, a wrong secret.
    let elsewhere = user_token_for(&app, ALICE, "https://other-tool.example/mcp").await;
    let (status, text) = listing(&app, &untrusted, &[("x-subject-token", &elsewhere)], "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{text}");
    let (status, text) = listing(&app, &untrusted, &[], &format!("?subject_token={subject}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("X-Subject-Token"), "{text}");
    let (status, _) = listing(&app, &untrusted, &[], "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let wrong = ServiceCredentials { secret: "obs_wrong".into(), ..untrusted.clone() };
    let (status, text) = listing(&app, &wrong, &[("x-subject-token", &subject)], "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!text.contains("strict"), "nothing listed: {text}");
    app.stop().await;
}
on_both!(status_api_refusals, the_status_api_refuses_what_would_leak_another_users_or_services_connections);

async fn the_calls_in_flight_when_the_provider_revokes_everything_get_the_reconnect_link(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    let client = Arc::new(connect_strict(&app).await);

    // The user removes the app at the provider: both tokens die. The first call's forced
    // refresh is held at the provider while more calls meet the 401 and wait for it.
    provider.revoke_everything();
    provider.hold_next_refresh();
    let calls: Vec<_> = (0..5)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { me(&client).await })
        })
        .collect();
    provider.wait_until_held().await;
    provider.release();

    for call in calls {
        match call.await.unwrap() {
            Err(ServiceError::McpError(error)) => {
                assert_eq!(error.code.0, -32042, "{error:?}");
                let url = error.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();
                assert!(url.starts_with(&app.url("/connect/")), "{url}");
            }
            other => panic!("expected the reconnect link, not the provider's 401: {other:?}"),
        }
    }
    assert_eq!(provider.invalid_grants(), 1, "one refresh reached the provider");
    let grant = app.state.core.store.grants().latest(&app.user_id(ALICE).await, "strict", None).await.unwrap().unwrap();
    assert_eq!(
        (grant.status, grant.refresh_gate.last_error),
        (GrantStatus::NeedsReconsent, Some(RefreshFailure::InvalidGrant))
    );
    let listed = client.call("list_connections", json!({})).await.unwrap().structured_content.unwrap();
    let strict = listed["connections"].as_array().unwrap().iter().find(|c| c["provider"] == "strict").unwrap();
    assert_eq!((strict["status"].as_str(), strict["state"].as_str()), (Some("needs_reconsent"), Some("revoked")));
    assert_eq!(strict["last_refresh_error"], "invalid_grant");
    app.stop().await;
}
on_both!(revoked_in_flight_mcp, the_calls_in_flight_when_the_provider_revokes_everything_get_the_reconnect_link);

async fn the_proxy_answers_409_needs_reconsent_to_calls_in_flight_when_the_provider_revokes_everything(
    backend: Backend,
) {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    connect_strict(&app).await;
    let service = register_service(
        &app,
        "proxied",
        &["strict"],
        ServiceOptions { resource: Some(RESOURCE), ..Default::default() },
    )
    .await;
    let subject = user_token_for(&app, ALICE, RESOURCE).await;
    let get = || {
        app.http()
            .get(app.url("/v1/proxy/strict/me"))
            .basic_auth(&service.client_id, Some(&service.secret))
            .header("x-subject-token", &subject)
            .send()
    };
    let first = get().await.unwrap();
    assert_eq!(first.status(), StatusCode::CONFLICT);
    let problem: Value = first.json().await.unwrap();
    app.allow_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;
    assert_eq!(get().await.unwrap().status(), StatusCode::OK);

    provider.revoke_everything();
    provider.hold_next_refresh();
    let calls: Vec<_> = (0..4).map(|_| tokio::spawn(get())).collect();
    provider.wait_until_held().await;
    provider.release();
    for call in calls {
        let answer = call.await.unwrap().unwrap();
        assert_eq!(answer.status(), StatusCode::CONFLICT, "not the provider's 401");
        let problem: Value = answer.json().await.unwrap();
        assert_eq!(
            (problem["code"].as_str(), problem["reason"].as_str()),
            (Some("authorization_required"), Some("needs_reconsent")),
            "{problem}"
        );
        assert!(problem["authorization"]["url"].as_str().unwrap().starts_with(&app.url("/connect/")));
    }
    let (_, text) = listing(&app, &service, &[("x-subject-token", &subject)], "").await;
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(entry(&body, "strict")["status"], "revoked", "{body}");
    assert_eq!(entry(&body, "strict")["last_refresh_error"], "invalid_grant");
    app.stop().await;
}
on_both!(
    revoked_in_flight_proxy,
    the_proxy_answers_409_needs_reconsent_to_calls_in_flight_when_the_provider_revokes_everything
);

/// A second account named `zürich`, with a real token from the strict provider (the token
/// answer names the account, as Notion's does), and the first account made the default again.
async fn add_zurich_account(app: &TestApp, provider: &StrictProvider) -> u64 {
    let issued: Value = app
        .http()
        .post(format!("{}/token", provider.url))
        .form(&[("grant_type", "authorization_code"), ("code", "x")])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let tokens = oauth_broker::providers::client::TokenSet {
        access_token: issued["access_token"].as_str().unwrap().to_owned().into(),
        refresh_token: None,
        expires_in: Some(Duration::from_secs(3600)),
        scopes: None,
        api_base_url: None,
        account: Some(oauth_broker::providers::token_response::AccountRef {
            id: "zurich-id".into(),
            label: Some("zürich".into()),
        }),
    };
    let config = app.state.core.providers.find("strict").unwrap().clone();
    let user = app.user_id(ALICE).await;
    oauth_broker::broker::tokens::store_grant(
        &app.state.core,
        &user,
        &config,
        tokens,
        &Default::default(),
        oauth_broker::broker::tokens::MadeIn {
            organization: &oauth_broker::domain::OrganizationId::default_organization(),
            app_id: None,
        },
    )
    .await
    .unwrap();
    sqlx::query("UPDATE grants SET updated_at = updated_at + 100 WHERE user_id = $1 AND account_label <> 'zürich'")
        .bind(&user)
        .execute(app.state.core.store.pool())
        .await
        .unwrap();
    provider.issued()
}

async fn x_account_selects_a_percent_encoded_account_and_refuses_one_it_cannot_read(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    connect_strict(&app).await;
    let default_token = provider.issued();
    let zurich_token = add_zurich_account(&app, &provider).await;
    let service =
        register_service(&app, "accounts", &["strict"], ServiceOptions { trusted: true, ..Default::default() }).await;
    let user = app.user_id(ALICE).await;
    let call = |account: Option<&[u8]>| {
        let mut request = app
            .http()
            .get(app.url("/v1/proxy/strict/me"))
            .basic_auth(&service.client_id, Some(&service.secret))
            .header("x-user-id", &user);
        if let Some(account) = account {
            request = request.header("x-account", reqwest::header::HeaderValue::from_bytes(account).unwrap());
        }
        request.send()
    };
    // The service is allowed to use both accounts first.
    for account in [None, Some("z%C3%BCrich".as_bytes())] {
        let first = call(account).await.unwrap();
        if first.status() == StatusCode::CONFLICT {
            let problem: Value = first.json().await.unwrap();
            app.allow_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;
        }
    }
    let used = |answer: reqwest::Response| async move {
        assert_eq!(answer.status(), StatusCode::OK);
        answer.json::<Value>().await.unwrap()["token_number"].as_u64().unwrap()
    };
    assert_eq!(used(call(None).await.unwrap()).await, default_token, "no header: the default account");
    assert_eq!(used(call(Some(b"z%C3%BCrich")).await.unwrap()).await, zurich_token, "percent-encoded UTF-8");

    // Raw UTF-8, a malformed escape, bytes that are not UTF-8: refused, naming the header —
    // never the default account's token.
    for bad in ["zürich".as_bytes(), b"z%C3%BCrich%", b"z%FCrich", b"z%G0rich"] {
        let refused = call(Some(bad)).await.unwrap();
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST, "{:?}", String::from_utf8_lossy(bad));
        let problem: Value = refused.json().await.unwrap();
        assert_eq!(problem["code"], "invalid_request");
        assert!(problem["detail"].as_str().unwrap().contains("X-Account"), "{problem}");
    }
    // An account the user does not hold is never the default one either.
    let unknown = call(Some(b"z%C3%BCrich-2")).await.unwrap();
    assert_eq!(unknown.status(), StatusCode::CONFLICT, "connect that account");
    app.stop().await;
}
on_both!(x_account_encoding, x_account_selects_a_percent_encoded_account_and_refuses_one_it_cannot_read);

#[tokio::test]
async fn the_proxys_caller_mistakes_are_400s_naming_them_never_an_outage() {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let app = spawn(Backend::Sqlite, &provider, "").await.unwrap();
    let service =
        register_service(&app, "mistakes", &["strict"], ServiceOptions { trusted: true, ..Default::default() }).await;
    let user = app.user_id(ALICE).await;
    let send = |method: reqwest::Method, path: &str| {
        app.http()
            .request(method, app.url(path))
            .basic_auth(&service.client_id, Some(&service.secret))
            .header("x-user-id", &user)
    };
    let refused = |answer: reqwest::Response| async move {
        assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
        assert!(answer.headers().get("retry-after").is_none(), "nothing to retry");
        let problem: Value = answer.json().await.unwrap();
        assert_eq!(problem["code"], "invalid_request", "{problem}");
        problem["detail"].as_str().unwrap().to_owned()
    };
    // A body on GET or HEAD (the provider is never called).
    let detail = refused(send(reqwest::Method::GET, "/v1/proxy/strict/me").body("x").send().await.unwrap()).await;
    assert!(detail.contains("GET"), "{detail}");
    let head = send(reqwest::Method::HEAD, "/v1/proxy/strict/me").body("x").send().await.unwrap();
    assert_eq!(head.status(), StatusCode::BAD_REQUEST, "HEAD answers the status, without a body");
    // A path that does not decode.
    let detail = refused(send(reqwest::Method::GET, "/v1/proxy/strict/%FF").send().await.unwrap()).await;
    assert!(detail.contains("path"), "{detail}");
    // A header that cannot be read is named, not taken as absent.
    let subject = reqwest::header::HeaderValue::from_bytes("tökén".as_bytes()).unwrap();
    let detail = refused(
        app.http()
            .get(app.url("/v1/proxy/strict/me"))
            .basic_auth(&service.client_id, Some(&service.secret))
            .header("x-subject-token", subject)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(detail.contains("X-Subject-Token"), "{detail}");
    assert_eq!(provider.refresh_requests(), 0);
    app.stop().await;
}

async fn a_2026_call_in_flight_when_the_provider_revokes_everything_gets_an_input_required_link(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    connect_strict(&app).await;
    let token = app.token_for(ALICE).await;
    let me = json!({"provider": "strict", "method": "GET", "path": "/me"});

    provider.revoke_everything();
    provider.hold_next_refresh();
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let request = crate::helpers::round_trips::request_2026(
                &app,
                &token,
                "provider_request",
                me.clone(),
                crate::helpers::round_trips::URL_AND_FORMS(),
                None,
                None,
            );
            tokio::spawn(async move { request.send().await.unwrap().text().await.unwrap() })
        })
        .collect();
    provider.wait_until_held().await;
    provider.release();
    for call in calls {
        let text = call.await.unwrap();
        let answer = crate::helpers::round_trips::answer_in(&text).expect("an answer");
        let (url, _state) = crate::helpers::round_trips::link_and_state(&answer);
        assert!(url.starts_with(&app.url("/connect/")), "the reconnect link, not the provider's 401: {url}");
    }
    app.stop().await;
}
on_both!(
    revoked_in_flight_2026,
    a_2026_call_in_flight_when_the_provider_revokes_everything_gets_an_input_required_link
);
