//! A token lifecycle that survives providers' bad moments (issue 12): backoff after a transient
//! refresh failure (honouring `Retry-After`), the per-minute cap on refresh attempts, the old
//! token served while it still works, one forced refresh after a provider's 401, a grant's own
//! API base (`instance_url`) and the provider's extra API headers. Against the strict provider,
//! on SQLite and PostgreSQL; time moves by the injected clock, never by sleeping.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::CallToolResult;
use serde_json::Value;

use oauth_broker::store::grants::GrantStatus;

use crate::helpers::strict_provider::{StrictProvider, connect_strict, me, spawn, status_of};
use crate::helpers::token_api::{ServiceOptions, register_service, user_token_for};
use crate::helpers::{ALICE, Backend, TestApp};

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

/// The retryable answer a tool call gets while the provider cannot be used: its `retryAfter`.
fn retry_after_of(result: &CallToolResult) -> u64 {
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let content = result.structured_content.as_ref().expect("structured content");
    assert_eq!(content["error"], "provider_unavailable", "{content}");
    content["retryAfter"].as_u64().expect("retryAfter")
}

async fn grant(app: &TestApp) -> oauth_broker::store::grants::GrantRow {
    app.state.core.store.grants().latest(&app.user_id(ALICE).await, "strict", None).await.unwrap().unwrap()
}

// ---- backoff honouring Retry-After ----

async fn a_503_with_retry_after_holds_refreshes_back_until_it_passes(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(30)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    let client = connect_strict(&app).await;
    // Arrange: the token has expired and the provider answers the refresh 503, Retry-After 20.
    app.clock.advance(31);
    provider.fail_next_refreshes(1, 503, Some(20));

    // Act / Assert: the call that tried is told to come back in 20 s.
    assert_eq!(retry_after_of(&me(&client).await.unwrap()), 20);
    assert_eq!(provider.refresh_requests(), 1);
    // Within the window nothing reaches the provider; the wait shrinks with the clock.
    app.clock.advance(5);
    for _ in 0..3 {
        assert_eq!(retry_after_of(&me(&client).await.unwrap()), 15);
    }
    assert_eq!(provider.refresh_requests(), 1, "no request reached the provider while backing off");
    let held = grant(&app).await;
    assert_eq!(held.status, GrantStatus::Active, "a transient failure never asks for a new consent");
    assert_eq!((held.refresh_gate.failures, held.refresh_gate.not_before), (1, Some(app.now() + 15)));

    // After the window the refresh runs, succeeds and clears the backoff.
    app.clock.advance(15);
    assert_eq!(status_of(&me(&client).await.unwrap()), 200);
    assert_eq!(provider.refresh_requests(), 2);
    let cleared = grant(&app).await.refresh_gate;
    assert_eq!((cleared.failures, cleared.not_before), (0, None));
    app.stop().await;
}
on_both!(retry_after_backoff, a_503_with_retry_after_holds_refreshes_back_until_it_passes);

async fn without_retry_after_the_backoff_grows_and_the_token_api_answers_503_with_retry_after(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(30)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    let client = connect_strict(&app).await;
    app.clock.advance(31);
    provider.fail_next_refreshes(2, 502, None);

    // First failure: 1 s (jitter adds at most half of it, rounded down).
    assert_eq!(retry_after_of(&me(&client).await.unwrap()), 1);
    app.clock.advance(1);
    // Second: 2-3 s.
    let second = retry_after_of(&me(&client).await.unwrap());
    assert!((2..=3).contains(&second), "{second}");
    assert_eq!(provider.refresh_requests(), 2);

    // The token API (the proxy here) says the same as HTTP: 503, Retry-After, problem+json.
    let service =
        register_service(&app, "backoff", &["strict"], ServiceOptions { trusted: true, ..Default::default() }).await;
    let alice = app.user_id(ALICE).await;
    let proxy = || {
        app.http()
            .get(app.url("/v1/proxy/strict/me"))
            .basic_auth(&service.client_id, Some(&service.secret))
            .header("x-user-id", &alice)
    };
    let first = proxy().send().await.unwrap();
    if first.status() == 409 {
        // This service is a new client of the connection: the user allows it first.
        let problem: Value = first.json().await.unwrap();
        app.allow_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;
    }
    let held = proxy().send().await.unwrap();
    assert_eq!(held.status(), 503);
    let retry: u64 = held.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=3).contains(&retry), "{retry}");
    assert!(held.headers()["content-type"].to_str().unwrap().starts_with("application/problem+json"));
    let problem: Value = held.json().await.unwrap();
    assert_eq!(
        (problem["code"].as_str(), problem["retry_after"].as_u64()),
        (Some("provider_unavailable"), Some(retry))
    );
    assert_eq!(provider.refresh_requests(), 2, "nothing reached the provider");

    app.clock.advance(3);
    assert_eq!(status_of(&me(&client).await.unwrap()), 200);
    assert_eq!(proxy().send().await.unwrap().status(), 200);
    assert_eq!(provider.refresh_requests(), 3);
    app.stop().await;
}
on_both!(exponential_backoff, without_retry_after_the_backoff_grows_and_the_token_api_answers_503_with_retry_after);

// ---- the cap on attempts per minute ----

async fn no_grant_sends_more_than_the_capped_refreshes_a_minute(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(30)).await;
    let Some(app) = spawn(backend, &provider, "refresh_attempts_per_minute = 2\n").await else { return };
    let client = connect_strict(&app).await;
    let start = app.now();
    app.clock.advance(31);
    // The provider keeps failing, asking for 1 s each time.
    provider.fail_next_refreshes(100, 429, Some(1));
    assert_eq!(retry_after_of(&me(&client).await.unwrap()), 1);
    app.clock.advance(1);
    assert_eq!(retry_after_of(&me(&client).await.unwrap()), 1);
    app.clock.advance(1);
    // The third attempt within the minute is refused here: the wait is the window's rest.
    let capped = retry_after_of(&me(&client).await.unwrap());
    assert_eq!(capped as i64, (start + 31) + 60 - app.now(), "until the window that began at the first attempt ends");
    assert_eq!(provider.refresh_requests(), 2, "the cap held the third attempt back");

    app.clock.advance(capped as i64);
    assert_eq!(retry_after_of(&me(&client).await.unwrap()), 1, "a new window: the provider is asked again");
    assert_eq!(provider.refresh_requests(), 3);
    app.stop().await;
}
on_both!(attempt_cap, no_grant_sends_more_than_the_capped_refreshes_a_minute);

// ---- a failure before expiry keeps the old token working ----

async fn a_refresh_failing_before_expiry_keeps_serving_the_old_token(backend: Backend) {
    // 100 s tokens: due 10 s before expiry.
    let provider = StrictProvider::start(Duration::from_secs(100)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    let client = connect_strict(&app).await;
    let before = grant(&app).await;
    app.clock.advance(95);
    provider.fail_next_refreshes(1, 503, Some(30));

    // The refresh ahead of expiry fails, the call still works with the old token.
    assert_eq!(status_of(&me(&client).await.unwrap()), 200);
    assert_eq!(provider.refresh_requests(), 1);
    // Backing off, still served, nothing sent to the provider.
    assert_eq!(status_of(&me(&client).await.unwrap()), 200);
    assert_eq!(provider.refresh_requests(), 1);
    assert_eq!(grant(&app).await.access_token_sealed, before.access_token_sealed, "the old token");

    // Once it has expired and the backoff still holds: retryable, never a new consent.
    app.clock.advance(5);
    assert_eq!(retry_after_of(&me(&client).await.unwrap()), 25);
    assert_eq!(grant(&app).await.status, GrantStatus::Active);
    app.stop().await;
}
on_both!(old_token_served, a_refresh_failing_before_expiry_keeps_serving_the_old_token);

// ---- a 401 for a token we believed valid ----

async fn a_401_refreshes_once_and_retries_once(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    let client = Arc::new(connect_strict(&app).await);

    // The provider revokes the access token server-side: the next call refreshes once and
    // succeeds with the new token.
    provider.revoke_access_tokens();
    assert_eq!(status_of(&me(&client).await.unwrap()), 200);
    assert_eq!(provider.refresh_requests(), 1);

    // Concurrent callers all meet the 401; one refresh serves them all.
    provider.revoke_access_tokens();
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { me(&client).await })
        })
        .collect();
    for call in calls {
        assert_eq!(status_of(&call.await.unwrap().unwrap()), 200);
    }
    assert_eq!(provider.refresh_requests(), 2, "one forced refresh for ten concurrent 401s");
    assert_eq!(provider.invalid_grants(), 0);

    // A second 401 (the new token refused too) is passed through, after one refresh only.
    provider.refuse_all_access_tokens();
    let refused = me(&client).await.unwrap();
    assert_eq!(status_of(&refused), 401);
    assert_eq!(refused.is_error, Some(true), "the provider's 401 is the model's to read");
    assert_eq!(provider.refresh_requests(), 3, "one forced refresh, one retry, no loop");
    assert_eq!(grant(&app).await.status, GrantStatus::Active);
    app.stop().await;
}
on_both!(forced_refresh_on_401, a_401_refreshes_once_and_retries_once);

async fn the_proxy_replays_a_request_with_its_body_after_a_401(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    connect_strict(&app).await;
    let resource = "https://replay.example/mcp";
    let service = register_service(
        &app,
        "replay",
        &["strict"],
        ServiceOptions { resource: Some(resource), ..Default::default() },
    )
    .await;
    let token = user_token_for(&app, ALICE, resource).await;
    let post = || {
        app.http()
            .post(app.url("/v1/proxy/strict/echo"))
            .basic_auth(&service.client_id, Some(&service.secret))
            .header("x-subject-token", &token)
            .header("content-type", "text/plain")
            .body("the body")
    };
    let first = post().send().await.unwrap();
    if first.status() == 409 {
        let problem: Value = first.json().await.unwrap();
        app.allow_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;
    }
    provider.revoke_access_tokens();
    let before = provider.refresh_requests();
    let answer = post().send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["body"], "the body", "the buffered body was sent again");
    assert_eq!(provider.refresh_requests(), before + 1);

    provider.refuse_all_access_tokens();
    assert_eq!(post().send().await.unwrap().status(), 401, "a second 401 is passed through");
    assert_eq!(provider.refresh_requests(), before + 2);
    app.stop().await;
}
on_both!(proxy_replay, the_proxy_replays_a_request_with_its_body_after_a_401);

async fn a_401_without_a_refresh_token_is_passed_through_without_a_refresh(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    let client = connect_strict(&app).await;
    let row = grant(&app).await;
    sqlx::query("UPDATE grants SET refresh_token_sealed = NULL WHERE id = $1")
        .bind(&row.id)
        .execute(app.state.core.store.pool())
        .await
        .unwrap();
    provider.revoke_access_tokens();
    assert_eq!(status_of(&me(&client).await.unwrap()), 401);
    assert_eq!(provider.refresh_requests(), 0);
    assert_eq!(grant(&app).await.status, GrantStatus::Active, "a 401 alone does not end the connection");
    app.stop().await;
}
on_both!(no_refresh_token_401, a_401_without_a_refresh_token_is_passed_through_without_a_refresh);

// ---- instance_url and extra API headers ----

async fn a_refresh_naming_a_new_instance_moves_the_grants_calls_there_with_the_providers_headers(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(30)).await;
    let extra = "api_base_from_token = \"instance_url\"\napi_base_domains = [\"127.0.0.1\"]\n\
                 user_agent = \"broker-test/1.0\"\n\
                 [providers.strict.api_headers]\n\"Client-Id\" = \"{client_id}\"\n\"Notion-Version\" = \"2022-06-28\"\n";
    let options = crate::helpers::SpawnOptions { toml: format!("{}{extra}", provider.toml()), ..Default::default() };
    let Some(app) = crate::helpers::spawn_app_opts(backend, options, |b| b).await else { return };
    let client = connect_strict(&app).await;
    let host = |result: &CallToolResult| result.structured_content.as_ref().unwrap()["body"]["host"].clone();
    let first = me(&client).await.unwrap();
    let provider_host = provider.url.trim_start_matches("http://");
    assert_eq!(host(&first), provider_host, "no instance named yet: the provider's API base");
    let body = &first.structured_content.as_ref().unwrap()["body"];
    assert_eq!(body["client_id"], "broker", "{{client_id}} filled");
    assert_eq!(body["notion_version"], "2022-06-28");
    assert_eq!(body["user_agent"], "broker-test/1.0");

    // The next refresh names another instance: it is stored and calls go there.
    provider.name_instance(&provider.instance);
    app.clock.advance(31);
    let moved = me(&client).await.unwrap();
    assert_eq!(status_of(&moved), 200);
    assert_eq!(host(&moved), provider.instance.trim_start_matches("http://"));
    let stored = app.state.core.store.grants().account(&grant(&app).await.id).await.unwrap().unwrap().1;
    assert_eq!(stored.as_deref(), Some(format!("{}/api/", provider.instance).as_str()));

    // The proxy calls the grant's instance too.
    let service =
        register_service(&app, "instance", &["strict"], ServiceOptions { trusted: true, ..Default::default() }).await;
    let alice = app.user_id(ALICE).await;
    let proxy = || {
        app.http()
            .get(app.url("/v1/proxy/strict/me"))
            .basic_auth(&service.client_id, Some(&service.secret))
            .header("x-user-id", &alice)
    };
    let first = proxy().send().await.unwrap();
    if first.status() == 409 {
        let problem: Value = first.json().await.unwrap();
        app.allow_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;
    }
    let answer = proxy().send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["host"], provider.instance.trim_start_matches("http://"));
    assert_eq!(body["client_id"], "broker");
    app.stop().await;
}
on_both!(instance_and_headers, a_refresh_naming_a_new_instance_moves_the_grants_calls_there_with_the_providers_headers);
