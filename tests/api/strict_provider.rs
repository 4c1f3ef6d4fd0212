//! An in-test OAuth provider as strict as real rotating ones: every refresh issues a new
//! refresh token and the old one is refused with `invalid_grant`. It approves any authorization
//! at once (no page), counts refresh requests, and can hold the next refresh request until the
//! test lets it answer — a request held and never answered rotates nothing (the provider has
//! not processed it).
//!
//! Configured in the broker as provider `strict` ([`StrictProvider::toml`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde_json::json;
use tokio::sync::{Notify, watch};

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
}

#[derive(Clone)]
pub struct StrictProvider {
    pub url: String,
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
        let provider = Self {
            url,
            inner: Arc::default(),
            lifetime: lifetime.as_secs(),
            held: watch::Sender::new(0),
            release: Arc::new(Notify::new()),
        };
        let router = axum::Router::new()
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/api/me", get(me))
            .with_state(provider.clone());
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
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
        json!({"access_token": access, "token_type": "Bearer", "expires_in": self.lifetime, "refresh_token": refresh})
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

async fn me(State(provider): State<StrictProvider>, headers: HeaderMap) -> Response {
    let presented = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    let inner = provider.inner.lock().unwrap();
    match presented {
        Some(token) if inner.access_tokens.iter().any(|t| t == token) => {
            axum::Json(json!({"sub": "strict-user"})).into_response()
        }
        _ => StatusCode::UNAUTHORIZED.into_response(),
    }
}
