//! An in-test OAuth provider as strict as real rotating ones: every refresh issues a new
//! refresh token and the old one is refused with `invalid_grant`. It approves any authorization
//! at once (no page), counts refresh requests, and can hold the next refresh request until the
//! test lets it answer — a request held and never answered rotates nothing (the provider has
//! not processed it).
//!
//! Configured in the broker as provider `strict` ([`StrictProvider::toml`]); [`spawn`] runs an app
//! with it and [`connect_strict`] connects alice's account there through the browser flow.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use oauth_broker::store::grants::GrantStatus;
use rmcp::ServiceError;
use serde_json::json;
use tokio::sync::{Notify, watch};

use super::{ALICE, Backend, ClientKind, McpClient, SpawnOptions, TestApp, spawn_app_opts};

#[derive(Default)]
struct Inner {
    /// The one refresh token that is valid now.
    refresh_token: Option<String>,
    /// Access tokens issued so far (any of them opens /api/me).
    access_tokens: Vec<String>,
    issued: u64,
    refresh_requests: u64,
    refreshes_answered: u64,
    invalid_grants: u64,
    hold_next: bool,
    /// Refresh answers carry no `refresh_token`: the one presented stays valid (RFC 6749 §6
    /// allows it; many providers do it).
    keep_refresh_token: bool,
    /// The next this-many refresh requests fail transiently: (status, Retry-After seconds).
    failing: u64,
    failure: Option<(StatusCode, Option<u64>)>,
    /// The API refuses every access token, even new ones (a second 401 after a refresh).
    refuse_all: bool,
    /// `instance_url` sent with each token answer (Salesforce), if set.
    instance_url: Option<String>,
}

#[derive(Clone)]
pub struct StrictProvider {
    pub url: String,
    /// A second address serving the same API (an "instance" a token answer may name).
    pub instance: String,
    inner: Arc<Mutex<Inner>>,
    /// Access token lifetime, seconds.
    lifetime: u64,
    held: watch::Sender<u64>,
    release: Arc<Notify>,
}

impl StrictProvider {
    /// Starts the provider on a random port; its access tokens live `lifetime`.
    pub async fn start(lifetime: Duration) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let instance_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let instance = format!("http://{}", instance_listener.local_addr().unwrap());
        let provider = Self {
            url,
            instance,
            inner: Arc::default(),
            lifetime: lifetime.as_secs(),
            held: watch::Sender::new(0),
            release: Arc::new(Notify::new()),
        };
        let router = axum::Router::new()
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/api/me", get(api))
            .route("/api/echo", get(api).post(api))
            .with_state(provider.clone());
        let instance_router = router.clone();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        tokio::spawn(async move { axum::serve(instance_listener, instance_router).await.unwrap() });
        provider
    }

    /// The broker's `[providers.strict]` table.
    pub fn toml(&self) -> String {
        format!(
            "[providers.strict]\nauthorization_url = \"{0}/authorize\"\ntoken_url = \"{0}/token\"\nclient_id = \"broker\"\n\
             client_secret = \"broker-secret\"\nscopes = [\"read\"]\napi_base_url = \"{0}/api/\"\n",
            self.url
        )
    }

    /// Refresh requests received (answered or not).
    pub fn refresh_requests(&self) -> u64 {
        self.inner.lock().unwrap().refresh_requests
    }

    /// Refreshes that rotated the token.
    pub fn refreshes_answered(&self) -> u64 {
        self.inner.lock().unwrap().refreshes_answered
    }

    /// Access tokens issued so far (the last one is number `issued`).
    #[allow(dead_code, reason = "used by the two-process test")]
    pub fn issued(&self) -> u64 {
        self.inner.lock().unwrap().issued
    }

    /// Refresh requests refused because they presented a spent refresh token.
    pub fn invalid_grants(&self) -> u64 {
        self.inner.lock().unwrap().invalid_grants
    }

    /// From now on, refresh answers carry no new refresh token and the presented one stays
    /// valid.
    #[allow(dead_code, reason = "used by the lifecycle tests")]
    pub fn stop_rotating(&self) {
        self.inner.lock().unwrap().keep_refresh_token = true;
    }

    /// The next `count` refresh requests answer `status` (with `Retry-After: retry_after` when
    /// given) and rotate nothing; each is counted in [`Self::refresh_requests`].
    #[allow(dead_code, reason = "used by the backoff tests")]
    pub fn fail_next_refreshes(&self, count: u64, status: u16, retry_after: Option<u64>) {
        let mut inner = self.inner.lock().unwrap();
        inner.failing = count;
        inner.failure = Some((StatusCode::from_u16(status).unwrap(), retry_after));
    }

    /// Revokes every access token issued so far, server-side: the API answers them 401.
    #[allow(dead_code, reason = "used by the 401 tests")]
    pub fn revoke_access_tokens(&self) {
        self.inner.lock().unwrap().access_tokens.clear();
    }

    /// Revokes every token issued so far, access and refresh (the user removed the app at the
    /// provider): the API answers them 401 and a refresh `invalid_grant`.
    #[allow(dead_code, reason = "used by the connection status tests")]
    pub fn revoke_everything(&self) {
        let mut inner = self.inner.lock().unwrap();
        inner.access_tokens.clear();
        inner.refresh_token = None;
    }

    /// From now on the API refuses every access token, new ones too.
    #[allow(dead_code, reason = "used by the 401 tests")]
    pub fn refuse_all_access_tokens(&self) {
        self.inner.lock().unwrap().refuse_all = true;
    }

    /// Token answers from now on name `url` as the grant's API base (`instance_url`).
    #[allow(dead_code, reason = "used by the instance_url tests")]
    pub fn name_instance(&self, url: &str) {
        self.inner.lock().unwrap().instance_url = Some(url.to_owned());
    }

    /// The next refresh request waits for [`Self::release`] before it is processed.
    pub fn hold_next_refresh(&self) {
        self.inner.lock().unwrap().hold_next = true;
    }

    /// Waits until a refresh request is being held (failing the test if none comes).
    pub async fn wait_until_held(&self) {
        let mut held = self.held.subscribe();
        tokio::time::timeout(Duration::from_secs(60), held.wait_for(|n| *n > 0))
            .await
            .expect("no refresh request reached the provider")
            .unwrap();
    }

    /// Lets the held refresh request be processed and answered.
    pub fn release(&self) {
        self.release.notify_one();
    }

    fn issue(&self, inner: &mut Inner) -> serde_json::Value {
        inner.issued += 1;
        let access = format!("at-{}-{}", inner.issued, uuid::Uuid::new_v4().simple());
        let refresh = format!("rt-{}-{}", inner.issued, uuid::Uuid::new_v4().simple());
        inner.access_tokens.push(access.clone());
        inner.refresh_token = Some(refresh.clone());
        let mut answer = json!({"access_token": access, "token_type": "Bearer", "expires_in": self.lifetime, "refresh_token": refresh});
        if let Some(instance) = &inner.instance_url {
            answer["instance_url"] = json!(instance);
        }
        answer
    }
}

#[derive(serde::Deserialize)]
struct AuthorizeQuery {
    redirect_uri: String,
    state: String,
}

async fn authorize(Query(query): Query<AuthorizeQuery>) -> Redirect {
    let mut back = url::Url::parse(&query.redirect_uri).unwrap();
    back.query_pairs_mut().append_pair("code", "the-code").append_pair("state", &query.state);
    Redirect::to(back.as_str())
}

#[derive(serde::Deserialize)]
struct TokenForm {
    grant_type: String,
    refresh_token: Option<String>,
}

async fn token(State(provider): State<StrictProvider>, Form(form): Form<TokenForm>) -> Response {
    if form.grant_type == "authorization_code" {
        let mut inner = provider.inner.lock().unwrap();
        return axum::Json(provider.issue(&mut inner)).into_response();
    }
    let hold = {
        let mut inner = provider.inner.lock().unwrap();
        inner.refresh_requests += 1;
        if inner.failing > 0
            && let Some((status, retry_after)) = inner.failure
        {
            inner.failing -= 1;
            let mut headers = HeaderMap::new();
            if let Some(seconds) = retry_after {
                headers.insert("retry-after", seconds.to_string().parse().unwrap());
            }
            return (status, headers, axum::Json(json!({"error": "temporarily_unavailable"}))).into_response();
        }
        std::mem::take(&mut inner.hold_next)
    };
    if hold {
        provider.held.send_modify(|n| *n += 1);
        provider.release.notified().await;
    }
    let mut inner = provider.inner.lock().unwrap();
    if form.refresh_token.is_none() || form.refresh_token != inner.refresh_token {
        inner.invalid_grants += 1;
        return (StatusCode::BAD_REQUEST, axum::Json(json!({"error": "invalid_grant"}))).into_response();
    }
    inner.refreshes_answered += 1;
    if inner.keep_refresh_token {
        let kept = inner.refresh_token.clone();
        let mut answer = provider.issue(&mut inner);
        answer.as_object_mut().unwrap().remove("refresh_token");
        inner.refresh_token = kept;
        return axum::Json(answer).into_response();
    }
    axum::Json(provider.issue(&mut inner)).into_response()
}

/// `/api/me` and `/api/echo` (any method): who the token is for, which address answered, and
/// the headers a provider's API may require (so tests see what the broker sent); 401 for a
/// token not issued, revoked, or refused.
async fn api(State(provider): State<StrictProvider>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let presented = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    let inner = provider.inner.lock().unwrap();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    match presented {
        Some(token) if !inner.refuse_all && inner.access_tokens.iter().any(|t| t == token) => axum::Json(json!({
            "sub": "strict-user",
            // Which issued token this is (the n of `at-n-…`; the token itself the broker redacts).
            "token_number": token.split('-').nth(1).and_then(|n| n.parse::<u64>().ok()),
            "host": header("host"),
            "client_id": header("client-id"),
            "notion_version": header("notion-version"),
            "user_agent": header("user-agent"),
            "body": String::from_utf8_lossy(&body),
        }))
        .into_response(),
        _ => StatusCode::UNAUTHORIZED.into_response(),
    }
}

pub(crate) async fn me(client: &McpClient) -> Result<rmcp::model::CallToolResult, ServiceError> {
    client.call("provider_request", json!({"provider": "strict", "method": "GET", "path": "/me"})).await
}

pub(crate) fn status_of(result: &rmcp::model::CallToolResult) -> serde_json::Value {
    result.structured_content.as_ref().map(|c| c["status"].clone()).unwrap_or_default()
}

/// The app with the strict provider configured (and `toml` appended).
pub(crate) async fn spawn(backend: Backend, provider: &StrictProvider, toml: &str) -> Option<TestApp> {
    let options = SpawnOptions { toml: format!("{toml}\n{}", provider.toml()), ..Default::default() };
    spawn_app_opts(backend, options, |b| b).await
}

/// A URL-mode client for ALICE whose `strict` account is connected through the browser flow.
pub(crate) async fn connect_strict(app: &TestApp) -> McpClient {
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let error = match me(&client).await {
        Err(ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    let url = error.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();
    let browser = app.browser();
    let path = url.strip_prefix(&app.address).expect("connect URL is ours").to_owned();
    if browser.get(&url).send().await.unwrap().status() == 303 {
        assert_eq!(app.sign_in(&browser, ALICE, &path).await.status(), 303);
    }
    let html = browser.get(&url).send().await.unwrap().text().await.unwrap();
    let csrf = crate::helpers::hidden_field(&html, "csrf_token").expect("consent form");
    let approved =
        browser.post(&url).form(&[("csrf_token", csrf.as_str()), ("action", "approve")]).send().await.unwrap();
    assert_eq!(approved.status(), 303, "approve redirects to the provider");
    let at_provider = browser.get(crate::helpers::location(&approved)).send().await.unwrap();
    let callback = browser.get(crate::helpers::location(&at_provider)).send().await.unwrap();
    assert!(callback.status().is_success() || callback.status().is_redirection(), "callback: {}", callback.status());
    let grant = app.state.core.store.grants().latest(&app.user_id(ALICE).await, "strict", None).await.unwrap();
    assert!(grant.is_some_and(|g| g.status == GrantStatus::Active), "connected");
    assert_eq!(status_of(&me(&client).await.unwrap()), 200, "the connection works");
    client
}
