//! The rules of a provider call, against a small in-test API: a path leaving the API base is
//! refused before anything is sent; a 401 costs one forced refresh and one retry; a second 401
//! is the answer; no token the call used comes back, in the body or a header.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use secrecy::{ExposeSecret, SecretString};

use super::*;
use crate::clock::ManualClock;
use crate::config::{Config, SettingsArgs};
use crate::domain::Scopes;
use crate::providers::client::TokenSet;
use crate::state::AppState;

const FIRST_TOKEN: &str = "first-access-token-0";

/// What the in-test API has seen, and which access tokens it takes.
#[derive(Default)]
struct Seen {
    api_requests: usize,
    refreshes: usize,
    /// Every token is refused (also the refreshed ones).
    refuse_all: bool,
    accepted: Vec<String>,
}

#[derive(Clone, Default)]
struct Api(Arc<Mutex<Seen>>);

impl Api {
    fn seen<T>(&self, read: impl FnOnce(&mut Seen) -> T) -> T {
        read(&mut self.0.lock().unwrap())
    }
}

/// `GET /api/echo`: the Authorization header it got, in the body and in a forwarded header
/// (`link`) and one that is never forwarded (`www-authenticate`); 401 for a refused token.
async fn echo(State(api): State<Api>, headers: HeaderMap) -> Response {
    let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let token = authorization.trim_start_matches("Bearer ").to_owned();
    let accepted = api.seen(|seen| {
        seen.api_requests += 1;
        !seen.refuse_all && seen.accepted.contains(&token)
    });
    let status = if accepted { StatusCode::OK } else { StatusCode::UNAUTHORIZED };
    let body = serde_json::json!({"authorization": authorization, "token": token}).to_string();
    let link = format!("<https://api.example/next?access_token={token}>; rel=\"next\"");
    let challenge = format!("Bearer error=\"invalid_token\", token=\"{token}\"");
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (header::LINK, link),
            (header::WWW_AUTHENTICATE, challenge),
        ],
        body,
    )
        .into_response()
}

/// `POST /token`: every refresh gets a new access token, which the API then takes.
async fn token(State(api): State<Api>) -> Response {
    let access = api.seen(|seen| {
        seen.refreshes += 1;
        let access = format!("refreshed-access-token-{}", seen.refreshes);
        seen.accepted.push(access.clone());
        access
    });
    let body = serde_json::json!({
        "access_token": access,
        "token_type": "bearer",
        "expires_in": 3600,
        "refresh_token": format!("refresh-token-{access}"),
    });
    axum::Json(body).into_response()
}

struct Setup {
    state: AppState,
    api: Api,
    user_id: String,
    _dir: tempfile::TempDir,
}

async fn setup() -> Setup {
    let api = Api::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let router = axum::Router::new().route("/api/echo", get(echo)).route("/token", post(token)).with_state(api.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });

    let dir = tempfile::tempdir().unwrap();
    let args = SettingsArgs {
        database_url: Some(format!("sqlite://{}?mode=rwc", dir.path().join("db.sqlite").display())),
        data_dir: Some(dir.path().to_owned()),
        ..Default::default()
    };
    let toml = format!(
        "[providers.echo]\nauthorization_url = \"{url}/authorize\"\ntoken_url = \"{url}/token\"\n\
         client_id = \"broker\"\nclient_secret = \"broker-secret\"\nscopes = [\"read\"]\napi_base_url = \"{url}/api/\"\n"
    );
    let config = Config::from_toml(&args, &toml).unwrap();
    let app = crate::App::build(config, Arc::new(ManualClock::starting_now())).await.unwrap();
    let state = app.state().clone();
    let user = state
        .core
        .store
        .users()
        .create_local(&state.core.config.issuer(), "alice", "no password", state.core.now())
        .await
        .unwrap();
    let tokens = TokenSet {
        access_token: SecretString::from(FIRST_TOKEN.to_owned()),
        refresh_token: Some(SecretString::from("first-refresh-token".to_owned())),
        expires_in: Some(Duration::from_secs(3600)),
        scopes: None,
        api_base_url: None,
        account: None,
    };
    crate::broker::tokens::store_grant(
        &state.core,
        &user.id,
        &provider(&state),
        tokens,
        &Scopes::default(),
        crate::broker::tokens::MadeIn {
            organization: &crate::domain::OrganizationId::default_organization(),
            app_id: None,
        },
    )
    .await
    .unwrap();
    Setup { state, api, user_id: user.id, _dir: dir }
}

fn provider(state: &AppState) -> std::sync::Arc<ProviderConfig> {
    state.core.providers.find("echo").unwrap()
}

impl Setup {
    async fn token(&self) -> AccessToken {
        let provider = &*provider(&self.state);
        crate::broker::tokens::access_token_for(
            &self.state.core,
            &self.user_id,
            provider,
            None,
            &Scopes::default(),
            None,
        )
        .await
        .unwrap()
    }

    async fn get(&self, path: &str) -> ProviderAnswer {
        let provider = &*provider(&self.state);
        let request = ApiRequest::new(provider, ApiMethod::parse("GET").unwrap(), path, Query::None, None).unwrap();
        call(&self.state.core, provider, &request, self.token().await).await.unwrap()
    }
}

fn assert_no_token_in(answer: &ProviderAnswer, tokens: &[&str]) {
    let shown = format!("{} {:?}", answer.body, answer.headers);
    for token in tokens {
        assert!(!shown.contains(token), "{token} leaked: {shown}");
    }
    assert!(answer.body.contains("[redacted]"), "the echo was there, redacted: {shown}");
    assert!(answer.headers["link"].contains("[redacted]"), "{shown}");
    assert!(!answer.headers.contains_key("www-authenticate"), "authentication headers are never forwarded");
}

#[tokio::test]
async fn a_path_leaving_the_api_base_is_refused_before_anything_is_sent() {
    let setup = setup().await;
    let provider = &*provider(&setup.state);
    let get = || ApiMethod::parse("GET").unwrap();
    for evil in ["../token", "%2e%2e/token", "//evil.example/x", "https://evil.example/x", "/..;/token"] {
        let refused = ApiRequest::new(provider, get(), evil, Query::None, None).err();
        assert_eq!(refused, Some(RequestError::BadPath), "{evil}");
    }
    let body = Body::Json(&serde_json::Value::Null);
    let refused = ApiRequest::new(provider, get(), "echo", Query::None, Some(body)).err();
    assert_eq!(refused, Some(RequestError::BodyNotAllowed(reqwest::Method::GET)));
    assert_eq!(setup.api.seen(|seen| seen.api_requests), 0);
}

#[tokio::test]
async fn a_401_costs_one_forced_refresh_and_one_retry_and_no_token_comes_back() {
    let setup = setup().await;
    // The API no longer takes the stored token (revoked on its side).
    let answer = setup.get("echo").await;
    assert_eq!(answer.status, 200);
    assert_eq!(setup.api.seen(|seen| (seen.api_requests, seen.refreshes)), (2, 1), "one refresh, one retry");
    assert_no_token_in(&answer, &[FIRST_TOKEN, "refreshed-access-token-1"]);
    let stored = setup.token().await;
    assert_eq!(stored.token.expose_secret(), "refreshed-access-token-1", "the refreshed token was kept");

    // The new token works: one request, nothing refreshed.
    let answer = setup.get("echo").await;
    assert_eq!(answer.status, 200);
    assert_eq!(setup.api.seen(|seen| (seen.api_requests, seen.refreshes)), (3, 1));
}

#[tokio::test]
async fn a_second_401_is_returned_as_it_is_without_a_loop() {
    let setup = setup().await;
    setup.api.seen(|seen| seen.refuse_all = true);
    let answer = setup.get("echo").await;
    assert_eq!(answer.status, 401, "the provider's 401 is the caller's to read");
    assert_eq!(setup.api.seen(|seen| (seen.api_requests, seen.refreshes)), (2, 1), "one refresh, one retry, no more");
    assert_no_token_in(&answer, &[FIRST_TOKEN, "refreshed-access-token-1"]);
}
