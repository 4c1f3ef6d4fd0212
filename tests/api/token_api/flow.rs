//! The token API for registered tool servers (`/v1/…`, RFC 8693 exchange at `/token`), end to
//! end: a real example tool server process (`examples/tool_server.rs`) between a real rmcp
//! client and the broker, the browser flow on the broker's pages, the strict demo provider; and
//! every refusal, each checked to change nothing.

use std::time::Duration;

use oauth_broker::crypto::OneTimeSecret;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::token_api::{
    ServiceCredentials, ServiceOptions, ToolServer, register_service, register_service_with, url_elicitation_required,
    user_token_for,
};
use crate::helpers::*;
use crate::on_both_backends;

impl ServiceCredentials {
    fn basic(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request.basic_auth(&self.client_id, Some(&self.secret))
    }

    async fn token(&self, app: &TestApp, body: Value) -> (StatusCode, Value) {
        let response = self.basic(app.http().post(app.url("/v1/tokens"))).json(&body).send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn authorization(&self, app: &TestApp, id: &str, wait: u64) -> (StatusCode, Value) {
        let url = app.url(&format!("/v1/authorizations/{id}?wait={wait}"));
        let response = self.basic(app.http().get(url)).send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

async fn a_client_of_a_tool_server_connects_through_the_broker_and_retries(app: &TestApp, mode: &str) {
    // Arrange: the tool server runs as its own process with a service credential; the operator
    // registered it with its MCP URL as resource; the user's MCP client holds a token for it.
    let secret = OneTimeSecret::generate("obs_", 32);
    let tool_server = ToolServer::start(app, "svc_whoami", secret.expose_plaintext(), mode).await;
    let options =
        ServiceOptions { resource: Some(&tool_server.mcp_url), proxy_only: mode == "proxy", trusted: false, org: None };
    register_service_with(app, "whoami", &["demo"], options, &secret).await;
    let token = user_token_for(app, ALICE, &tool_server.mcp_url).await;
    let client = mcp_client_at(&tool_server.mcp_url, &token, ClientKind::Url).await.unwrap();

    // Act 1: the tool needs the demo provider, which alice has not connected.
    let (elicitation_id, url) = url_elicitation_required(client.call("whoami_at_demo", json!({})).await);

    // Assert 1: the link is the broker's own connect page, and it names the tool server.
    assert!(url.starts_with(&app.url("/connect/")), "{url}");
    assert!(url.ends_with(&elicitation_id));
    let browser = app.browser();
    let path = url.strip_prefix(&app.address).unwrap();
    assert_eq!(app.sign_in(&browser, ALICE, path).await.status(), 303);
    let page = browser.get(&url).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("whoami"), "the consent page names the tool server: {page}");

    // Act 2: the user approves at the broker and at the provider.
    let callback = app.approve_in_browser(&browser, &url, ALICE).await;
    assert!(callback.status().is_success() || callback.status().is_redirection(), "{}", callback.status());

    // Assert 2: the tool server relayed the completion, and the retry reaches the provider.
    assert_eq!(client.next_completion(Duration::from_secs(30)).await.as_deref(), Some(elicitation_id.as_str()));
    let result = client.call("whoami_at_demo", json!({})).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let shown = serde_json::to_string(&result).unwrap();
    assert!(shown.contains("demo-user"), "the provider's answer: {shown}");
    // The consent was recorded for the tool server, not for any MCP client of the broker.
    let user = app.user_id(ALICE).await;
    let consents = app.state.core.store.consents().for_user(&user).await.unwrap();
    assert!(consents.iter().any(|c| c.client_key == "service:svc_whoami"), "{consents:?}");

    client.close().await;
    tool_server.stop().await;
}

async fn exchange_mode_end_to_end(app: &TestApp) {
    a_client_of_a_tool_server_connects_through_the_broker_and_retries(app, "exchange").await;
}
on_both_backends!(tool_server_exchange_end_to_end, exchange_mode_end_to_end);

#[tokio::test]
async fn a_proxy_only_tool_server_works_end_to_end_without_holding_a_token() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    a_client_of_a_tool_server_connects_through_the_broker_and_retries(&app, "proxy").await;
    app.stop().await;
}

const RESOURCE: &str = "https://tools.example/mcp";

async fn a_service_gets_a_token_after_the_user_connects(app: &TestApp) {
    let service =
        register_service(app, "notes", &["demo"], ServiceOptions { resource: Some(RESOURCE), ..Default::default() })
            .await;
    let token = user_token_for(app, ALICE, RESOURCE).await;

    // Not connected: a typed answer with the broker's link, as RFC 9457 problem JSON.
    let response = service
        .basic(app.http().post(app.url("/v1/tokens")))
        .json(&json!({"subject_token": token, "provider": "demo", "scopes": ["profile"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CONFLICT);
    assert_eq!(response.headers()["content-type"], "application/problem+json");
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["type"], "urn:oauth-broker:problem:authorization_required");
    assert_eq!(problem["reason"], "not_connected");
    let id = problem["authorization"]["id"].as_str().unwrap().to_owned();
    let url = problem["authorization"]["url"].as_str().unwrap().to_owned();
    assert_eq!(url, app.url(&format!("/connect/{id}")));
    assert!(problem["authorization"]["expires_at"].as_i64().unwrap() > app.now());

    // The same question again reuses the open link.
    let (_, again) =
        service.token(app, json!({"subject_token": token, "provider": "demo", "scopes": ["profile"]})).await;
    assert_eq!(again["authorization"]["id"], id.as_str());

    // A long poll started before the user finishes returns when they do.
    let (status, pending) = service.authorization(app, &id, 0).await;
    assert_eq!((status, pending["status"].as_str()), (StatusCode::OK, Some("pending")));
    let poll = {
        let (client_id, secret, url) =
            (service.client_id.clone(), service.secret.clone(), app.url(&format!("/v1/authorizations/{id}?wait=30")));
        tokio::spawn(async move {
            reqwest::Client::new()
                .get(url)
                .basic_auth(client_id, Some(secret))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    app.approve_in_browser(&app.browser(), &url, ALICE).await;
    let finished = tokio::time::timeout(Duration::from_secs(30), poll).await.unwrap().unwrap();
    assert_eq!(finished["status"], "completed", "{finished}");

    // Now the token, usable at the provider.
    let (status, body) =
        service.token(app, json!({"subject_token": token, "provider": "demo", "scopes": ["profile"]})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["account"], "demo-user");
    assert!(body["scopes"].as_array().unwrap().contains(&json!("profile")));
    let access_token = body["access_token"].as_str().unwrap();
    let me = app.http().get(app.url("/demo-provider/api/me")).bearer_auth(access_token).send().await.unwrap();
    assert_eq!(me.status(), 200);

    // More scopes than the connection holds: the user must reconnect granting them.
    let (status, more) = service
        .token(app, json!({"subject_token": token, "provider": "demo", "scopes": ["profile", "notes:write"]}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{more}");
    assert_eq!(more["reason"], "missing_scopes");
    assert_eq!(more["missing_scopes"], json!(["notes:write"]));
}
on_both_backends!(service_gets_a_token, a_service_gets_a_token_after_the_user_connects);

/// Least privilege: a connect asks the provider for the scopes requested plus what the provider
/// needs to work (the demo provider's `profile`, where the broker reads the account), never
/// the provider's defaults on top; the consent page and the stored grant say exactly those.
async fn a_connect_asks_for_what_was_asked_and_what_the_provider_needs(app: &TestApp) {
    let service =
        register_service(app, "least", &["demo"], ServiceOptions { resource: Some(RESOURCE), ..Default::default() })
            .await;
    for (user, asked, asks_provider) in [(ALICE, "profile", "profile"), (BOB, "notes:read", "notes:read profile")] {
        let token = user_token_for(app, user, RESOURCE).await;
        let body = json!({"subject_token": token, "provider": "demo", "scopes": [asked]});
        let (status, problem) = service.token(app, body.clone()).await;
        assert_eq!(status, StatusCode::CONFLICT, "{problem}");
        let id = problem["authorization"]["id"].as_str().unwrap();
        let url = problem["authorization"]["url"].as_str().unwrap().to_owned();
        let row = app.state.core.store.authorizations().by_id(id).await.unwrap().unwrap();
        assert_eq!(row.scopes.to_space_separated(), asks_provider, "{user} asked for {asked}");

        let browser = app.browser();
        app.sign_in(&browser, user, "/").await;
        let consent = browser.get(&url).send().await.unwrap().text().await.unwrap();
        assert!(consent.contains("See your account name"), "{consent}");
        assert_eq!(consent.contains("Read your notes"), asked == "notes:read", "only what is asked: {consent}");
        app.approve_in_browser(&browser, &url, user).await;

        let (status, issued) = service.token(app, body).await;
        assert_eq!(status, StatusCode::OK, "{issued}");
        let expected: Vec<&str> = asks_provider.split(' ').collect();
        assert_eq!(issued["scopes"], json!(expected), "{issued}");
        let owner = app.state.core.store.users().by_username(user).await.unwrap().unwrap();
        let grant =
            app.state.core.store.grants().all().await.unwrap().into_iter().find(|g| g.user_id == owner.id).unwrap();
        assert_eq!(grant.scopes.to_space_separated(), asks_provider, "the stored grant holds what was asked");
    }
}
on_both_backends!(least_privilege, a_connect_asks_for_what_was_asked_and_what_the_provider_needs);

async fn token_exchange_at_the_token_endpoint_follows_rfc_8693(app: &TestApp) {
    let service =
        register_service(app, "notes", &["demo"], ServiceOptions { resource: Some(RESOURCE), ..Default::default() })
            .await;
    let token = user_token_for(app, ALICE, RESOURCE).await;
    let exchange = |subject: String| {
        let form = vec![
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange".to_owned()),
            ("subject_token", subject),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:access_token".to_owned()),
            ("provider", "demo".to_owned()),
            ("scope", "profile".to_owned()),
        ];
        service.basic(app.http().post(app.url("/token"))).form(&form).send()
    };
    let refused = exchange(token.clone()).await.unwrap();
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"], "authorization_required", "OAuth error shape: {error}");
    let url = error["authorization"]["url"].as_str().unwrap().to_owned();
    app.approve_in_browser(&app.browser(), &url, ALICE).await;

    let answer = exchange(token).await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(answer.headers()["cache-control"], "no-store");
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["issued_token_type"], "urn:ietf:params:oauth:token-type:access_token");
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["provider"], "demo");
    assert!(body["expires_in"].as_i64().unwrap() > 0);
    assert!(!body["access_token"].as_str().unwrap().is_empty());
}
on_both_backends!(token_exchange, token_exchange_at_the_token_endpoint_follows_rfc_8693);

#[tokio::test]
async fn a_service_asks_the_user_before_using_a_connection_made_by_another_client() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    // Alice connected the demo provider from an MCP client of the broker.
    let _mcp = app.connected_client(ALICE).await;
    let service =
        register_service(&app, "notes", &["demo"], ServiceOptions { resource: Some(RESOURCE), ..Default::default() })
            .await;
    let token = user_token_for(&app, ALICE, RESOURCE).await;

    let (status, problem) = service.token(&app, json!({"subject_token": token, "provider": "demo"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    assert_eq!(problem["reason"], "consent_required");
    let url = problem["authorization"]["url"].as_str().unwrap();
    let page = app.allow_in_browser(&app.browser(), url, ALICE).await;
    let named = "<strong>notes</strong> <span class=\"muted\">(a tool server an operator registered)</span>";
    assert!(page.contains(named), "the consent page names the tool server: {page}");

    let (status, body) = service.token(&app, json!({"subject_token": token, "provider": "demo"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app.stop().await;
}

#[tokio::test]
async fn authorization_events_stream_until_the_user_finishes() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let service =
        register_service(&app, "notes", &["demo"], ServiceOptions { resource: Some(RESOURCE), ..Default::default() })
            .await;
    let token = user_token_for(&app, ALICE, RESOURCE).await;
    let (_, problem) = service.token(&app, json!({"subject_token": token, "provider": "demo"})).await;
    let id = problem["authorization"]["id"].as_str().unwrap().to_owned();
    let url = problem["authorization"]["url"].as_str().unwrap().to_owned();

    let mut stream =
        service.basic(app.http().get(app.url(&format!("/v1/authorizations/{id}/events")))).send().await.unwrap();
    assert_eq!(stream.status(), 200);
    assert!(stream.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let mut seen = String::new();
    let first = tokio::time::timeout(Duration::from_secs(10), stream.chunk()).await.unwrap().unwrap().unwrap();
    seen.push_str(&String::from_utf8_lossy(&first));
    assert!(seen.contains("event: status") && seen.contains("\"pending\""), "{seen}");

    app.approve_in_browser(&app.browser(), &url, ALICE).await;
    // The stream reports the completion and then ends.
    let rest = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(chunk) = stream.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        seen
    })
    .await
    .expect("the stream ends after the final status");
    assert!(rest.contains("\"completed\""), "{rest}");
    app.stop().await;
}

#[tokio::test]
async fn the_proxy_adds_the_token_and_keeps_to_the_api_base() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let service = register_service(
        &app,
        "proxied",
        &["demo"],
        ServiceOptions { resource: Some(RESOURCE), proxy_only: true, trusted: false, org: None },
    )
    .await;
    let token = user_token_for(&app, ALICE, RESOURCE).await;
    let proxy = |path: &str| {
        service
            .basic(app.http().get(app.url(&format!("/v1/proxy/demo/{path}"))))
            .header("x-subject-token", &token)
            .send()
    };
    let first = proxy("me").await.unwrap();
    assert_eq!(first.status(), StatusCode::CONFLICT);
    let problem: Value = first.json().await.unwrap();
    app.approve_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;

    let me = proxy("me").await.unwrap();
    assert_eq!(me.status(), 200);
    assert!(me.headers()["content-type"].to_str().unwrap().contains("json"));
    let body: Value = me.json().await.unwrap();
    assert_eq!(body["account"], "demo-user");

    // The path cannot leave the API base, however it is spelled; nothing reaches the provider.
    // (Spelled so the HTTP client sends them as they are: it would resolve a bare `%2e%2e/`.)
    for evil in ["..%2F..%2Fdemo-provider%2Ftoken", "%2e%2e%2Fauthorize", "a%2F%2E%2E%2F%2e%2e%2Fx", "%5C..%5Cx"] {
        let refused = proxy(evil).await.unwrap();
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST, "{evil}");
        let problem: Value = refused.json().await.unwrap();
        assert_eq!(problem["code"], "invalid_request", "{evil}");
    }
    // A body on GET is the caller's mistake, refused as such (not as the provider's failure).
    let with_body = service
        .basic(app.http().get(app.url("/v1/proxy/demo/me")))
        .header("x-subject-token", &token)
        .body("a body")
        .send()
        .await
        .unwrap();
    assert_eq!(with_body.status(), StatusCode::BAD_REQUEST);
    let problem: Value = with_body.json().await.unwrap();
    assert_eq!(problem["code"], "invalid_request");
    assert!(problem["detail"].as_str().unwrap().contains("a body is not allowed with GET"), "{problem}");
    app.stop().await;
}

#[tokio::test]
async fn the_openapi_document_describes_the_token_api() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let document: Value = app.http().get(app.url("/v1/openapi.json")).send().await.unwrap().json().await.unwrap();
    assert!(document["openapi"].as_str().unwrap().starts_with("3."));
    for path in
        ["/v1/tokens", "/v1/authorizations/{id}", "/v1/authorizations/{id}/events", "/v1/proxy/{provider}/{path}"]
    {
        assert!(document["paths"].get(path).is_some(), "{path} is documented");
    }
    assert_eq!(document["components"]["securitySchemes"]["service"]["scheme"], "basic");
    app.stop().await;
}

/// What a refusal must leave alone.
async fn snapshot(app: &TestApp) -> (usize, usize, usize) {
    let user = app.user_id(ALICE).await;
    let consents = app.state.core.store.consents().for_user(&user).await.unwrap().len();
    let grants = app.state.core.store.grants().for_user(&user).await.unwrap().len();
    let authorizations = app.state.core.store.authorizations().for_user(&user, 1000).await.unwrap().len();
    (consents, grants, authorizations)
}

async fn refusals_change_nothing(app: &TestApp) {
    let service =
        register_service(app, "notes", &["demo"], ServiceOptions { resource: Some(RESOURCE), ..Default::default() })
            .await;
    let other = register_service(
        app,
        "other",
        &["demo"],
        ServiceOptions { resource: Some("https://other.example/mcp"), ..Default::default() },
    )
    .await;
    let proxy_only = register_service(
        app,
        "proxied",
        &["demo"],
        ServiceOptions { resource: Some("https://proxied.example/mcp"), proxy_only: true, trusted: false, org: None },
    )
    .await;
    let not_given_demo = register_service(
        app,
        "github-only",
        &["github"],
        ServiceOptions { resource: Some(RESOURCE), ..Default::default() },
    )
    .await;
    let token = user_token_for(app, ALICE, RESOURCE).await;
    // One authorization of `notes` exists, for the polling checks.
    let (_, problem) = service.token(app, json!({"subject_token": token, "provider": "demo"})).await;
    let id = problem["authorization"]["id"].as_str().unwrap().to_owned();
    let before = snapshot(app).await;
    let ask = json!({"subject_token": token, "provider": "demo"});

    // Wrong secret, unknown service, and a rotated secret: one invalid_client answer.
    let wrong = ServiceCredentials { secret: "obs_wrong".into(), ..service.clone_for_test() };
    let (status, body) = wrong.token(app, ask.clone()).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::UNAUTHORIZED, Some("invalid_client")), "{body}");
    let unknown = ServiceCredentials { client_id: "svc_nobody".into(), ..service.clone_for_test() };
    assert_eq!(unknown.token(app, ask.clone()).await.0, StatusCode::UNAUTHORIZED);
    let rotated = OneTimeSecret::generate("obs_", 32);
    assert!(app.state.core.store.services().rotate_secret("notes", rotated.hash(), app.now()).await.unwrap());
    let (status, _) = service.token(app, ask.clone()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "the old secret stops working at once");
    let service = ServiceCredentials { secret: rotated.expose_plaintext().to_owned(), ..service.clone_for_test() };
    let plain = app.http().post(app.url("/v1/tokens")).json(&ask).send().await.unwrap();
    assert_eq!(plain.status(), StatusCode::UNAUTHORIZED);
    assert!(plain.headers()["www-authenticate"].to_str().unwrap().starts_with("Basic"));

    // A user token for another audience (the broker's own /mcp, another tool server), expired,
    // or not a token at all.
    for subject in [
        app.token_for(ALICE).await,
        user_token_for(app, ALICE, "https://other.example/mcp").await,
        "not-a-jwt".to_owned(),
    ] {
        let (status, body) = service.token(app, json!({"subject_token": subject, "provider": "demo"})).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (StatusCode::UNAUTHORIZED, Some("invalid_subject_token")),
            "{body}"
        );
    }
    app.clock.advance(3600 + 120);
    let (status, body) = service.token(app, ask.clone()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("invalid_subject_token")),
        "expired: {body}"
    );
    app.clock.advance(-(3600 + 120));

    // Another service cannot use a token meant for this one.
    let (status, _) = other.token(app, ask.clone()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a token for `notes` is not one for `other`");

    // A provider the service was not given; an unknown provider; a malformed scope.
    let (status, body) = not_given_demo.token(app, ask.clone()).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::FORBIDDEN, Some("forbidden")), "{body}");
    let (status, body) = service.token(app, json!({"subject_token": token, "provider": "nope"})).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::NOT_FOUND, Some("unknown_provider")));
    let (status, body) =
        service.token(app, json!({"subject_token": token, "provider": "demo", "scopes": ["a b"]})).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_scope")));
    // Scopes the provider does not offer (issue 12): refused before any authorization or provider.
    let opened = app.state.core.store.authorizations().all(100).await.unwrap().len();
    for unoffered in [json!(["admin:everything"]), json!(["profile", "read&redirect_uri=https://evil.example/cb"])] {
        let (status, body) =
            service.token(app, json!({"subject_token": token, "provider": "demo", "scopes": unoffered})).await;
        assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_scope")), "{body}");
        assert!(body["detail"].as_str().unwrap_or_default().contains("does not offer"), "{body}");
    }
    assert_eq!(app.state.core.store.authorizations().all(100).await.unwrap().len(), opened, "nothing was opened");

    // A proxy-only service asking for a raw token, here or by token exchange.
    let proxied_token = user_token_for(app, ALICE, "https://proxied.example/mcp").await;
    let (status, body) = proxy_only.token(app, json!({"subject_token": proxied_token, "provider": "demo"})).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::FORBIDDEN, Some("forbidden")), "{body}");
    let exchanged = proxy_only
        .basic(app.http().post(app.url("/token")))
        .form(&[
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"),
            ("subject_token", proxied_token.as_str()),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:access_token"),
            ("provider", "demo"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(exchanged.status(), StatusCode::FORBIDDEN);

    // An untrusted service naming a user instead of presenting the user's token.
    let user = app.user_id(ALICE).await;
    let (status, body) = service.token(app, json!({"user_id": user, "provider": "demo"})).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::FORBIDDEN, Some("forbidden")), "{body}");

    // Unknown authorization ids, and another service's authorization: the same 404.
    for (who, asked) in [(&service, "x".repeat(43)), (&service, "short".to_owned()), (&other, id.clone())] {
        let (status, body) = who.authorization(app, &asked, 0).await;
        assert_eq!((status, body["code"].as_str()), (StatusCode::NOT_FOUND, Some("unknown_authorization")), "{body}");
    }
    let events = other.basic(app.http().get(app.url(&format!("/v1/authorizations/{id}/events")))).send().await.unwrap();
    assert_eq!(events.status(), StatusCode::NOT_FOUND);

    assert_eq!(snapshot(app).await, before, "no refusal changed anything");
}
on_both_backends!(token_api_refusals, refusals_change_nothing);

#[tokio::test]
async fn a_trusted_service_may_name_the_user() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let service =
        register_service(&app, "backoffice", &["demo"], ServiceOptions { trusted: true, ..Default::default() }).await;
    let user = app.user_id(ALICE).await;
    let (status, problem) = service.token(&app, json!({"user_id": user, "provider": "demo"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    app.approve_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;
    let (status, body) = service.token(&app, json!({"user_id": user, "provider": "demo"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // A service without a resource cannot take user tokens, and nobody can be named twice.
    let (status, body) = service.token(&app, json!({"subject_token": "x", "provider": "demo"})).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::FORBIDDEN, Some("forbidden")), "{body}");
    let (status, _) = service.token(&app, json!({"user_id": user, "subject_token": "x", "provider": "demo"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = service.token(&app, json!({"user_id": "no-such-user", "provider": "demo"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    app.stop().await;
}

impl ServiceCredentials {
    fn clone_for_test(&self) -> Self {
        Self { client_id: self.client_id.clone(), secret: self.secret.clone(), resource: self.resource.clone() }
    }
}

#[tokio::test]
async fn an_mcp_client_discovers_the_broker_from_the_tool_server_and_gets_a_token_for_it() {
    use rmcp::transport::auth::{AuthorizationRequest, OAuthState};

    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let secret = OneTimeSecret::generate("obs_", 32);
    let tool_server = ToolServer::start(&app, "svc_whoami", secret.expose_plaintext(), "exchange").await;
    let options = ServiceOptions { resource: Some(&tool_server.mcp_url), ..Default::default() };
    register_service_with(&app, "whoami", &["demo"], options, &secret).await;

    // Discovery starts at the tool server (its 401 and RFC 9728 metadata name the broker),
    // then registration and authorization at the broker, for the tool server's resource.
    let mut oauth = OAuthState::new(tool_server.mcp_url.clone(), None).await.unwrap();
    oauth
        .start_authorization(
            AuthorizationRequest::new("http://127.0.0.1:33418/callback").with_client_name("a desktop MCP client"),
        )
        .await
        .unwrap();
    let authorize = oauth.get_authorization_url().await.unwrap();
    assert!(authorize.starts_with(&app.url("/authorize?")), "{authorize}");
    let browser = app.browser();
    let path = authorize.strip_prefix(&app.address).unwrap();
    assert_eq!(app.sign_in(&browser, ALICE, path).await.status(), 303);
    let html = browser.get(&authorize).send().await.unwrap().text().await.unwrap();
    assert!(
        html.contains("whoami (a tool server an operator registered)"),
        "the consent page names the tool server: {html}"
    );
    let mut form = hidden_fields(&html);
    form.push(("action".into(), "approve".into()));
    let approved = browser.post(app.url("/authorize")).form(&form).send().await.unwrap();
    oauth.handle_callback_url(&location(&approved)).await.unwrap();
    let access = oauth.into_authorization_manager().expect("authorized").get_access_token().await.unwrap();

    // The token opens the tool server (which the broker's token API checks), not the broker.
    let refused_here = app.http().post(app.mcp_url()).bearer_auth(&access).send().await.unwrap();
    assert_eq!(refused_here.status(), StatusCode::UNAUTHORIZED, "a tool server's token is not one for /mcp");
    let client = mcp_client_at(&tool_server.mcp_url, &access, ClientKind::Url).await.unwrap();
    let (_, url) = url_elicitation_required(client.call("whoami_at_demo", json!({})).await);
    app.approve_in_browser(&browser, &url, ALICE).await;
    let result = client.call("whoami_at_demo", json!({})).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");

    // A resource that is neither the broker's nor a registered tool server's is refused.
    let other = authorize.replace(&urlencode(&tool_server.mcp_url), &urlencode("https://unregistered.example/mcp"));
    assert_ne!(other, authorize, "the request named the tool server's resource");
    let refused = browser.get(&other).send().await.unwrap();
    let back = location(&refused);
    assert!(back.contains("error=invalid_target"), "{back}");

    client.close().await;
    tool_server.stop().await;
    app.stop().await;
}

// MCP security best practices §Token passthrough: a tool server registered (by mistake, or
// before the broker's public URL changed) with the broker's own audience would take every MCP
// client's /mcp token as one of its own users'.
async fn a_service_whose_resource_is_the_brokers_own_audience_takes_no_mcp_token(app: &TestApp) {
    let mcp_url = app.mcp_url();
    let service =
        register_service(app, "sneaky", &["demo"], ServiceOptions { resource: Some(&mcp_url), ..Default::default() })
            .await;
    let broker_token = app.token_for(ALICE).await;
    let before = snapshot(app).await;

    let (status, body) = service.token(app, json!({"subject_token": broker_token, "provider": "demo"})).await;

    assert_eq!((status, body["code"].as_str()), (StatusCode::FORBIDDEN, Some("forbidden")), "{body}");
    assert_eq!(snapshot(app).await, before, "no authorization was opened for alice");
}
on_both_backends!(
    service_with_the_brokers_audience,
    a_service_whose_resource_is_the_brokers_own_audience_takes_no_mcp_token
);
