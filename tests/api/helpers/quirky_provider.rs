//! An in-test provider that answers the way real ones do rather than as RFC 6749 says: a
//! GitHub-like token answer (form-encoded, `scope=repo,gist`, no `expires_in`, no `iss` on the
//! redirect back), or Slack v2's token nested in `authed_user`, or Salesforce's `instance_url`,
//! or an error with HTTP 200. Its identity endpoint answers like GitHub's `/user` (a numeric
//! `id` and a `login` the test can rename). It counts token requests, so a test can show a
//! response was refused before any reached it.

use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde_json::json;

/// How the token endpoint answers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// `access_token=…&scope=repo%2Cgist&token_type=bearer`, form-encoded.
    GithubForm,
    /// `{"ok":true,"authed_user":{"access_token":…,"scope":"repo,gist"}}`.
    SlackNested,
    /// JSON with `instance_url` on `localhost` (the provider itself, by another name).
    SalesforceInstance,
    /// `error=bad_verification_code` with HTTP 200.
    ErrorWith200,
}

struct Inner {
    answer: Answer,
    login: String,
    token_requests: u64,
    issued: Vec<String>,
    identity_fails: bool,
}

#[derive(Clone)]
pub struct QuirkyProvider {
    pub url: String,
    port: u16,
    inner: Arc<Mutex<Inner>>,
}

impl QuirkyProvider {
    pub async fn start(answer: Answer) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let provider = Self {
            url: format!("http://127.0.0.1:{port}"),
            port,
            inner: Arc::new(Mutex::new(Inner {
                answer,
                login: "octocat".into(),
                token_requests: 0,
                issued: Vec::new(),
                identity_fails: false,
            })),
        };
        let router = axum::Router::new()
            .route("/login/oauth/authorize", get(authorize))
            .route("/login/oauth/access_token", post(token))
            .route("/user", get(user))
            .route("/api/whoami", get(whoami))
            .with_state(provider.clone());
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        provider
    }

    /// The broker's table for this provider under `id`: the catalogue's GitHub entry with its
    /// endpoints pointed here, so the catalogue's quirks (form answers, the numeric id) are the
    /// ones under test. `extra` is appended to the table.
    pub fn toml(&self, id: &str, extra: &str) -> String {
        format!(
            "[providers.{id}]\ncatalogue = \"github\"\nclient_id = \"broker\"\nclient_secret = \"broker-secret\"\n\
             authorization_url = \"{0}/login/oauth/authorize\"\ntoken_url = \"{0}/login/oauth/access_token\"\n\
             userinfo_url = \"{0}/user\"\napi_base_url = \"{0}/api/\"\nscopes = [\"repo\", \"gist\"]\n{extra}\n",
            self.url
        )
    }

    pub fn token_requests(&self) -> u64 {
        self.inner.lock().unwrap().token_requests
    }

    /// The account is renamed at the provider; its numeric id stays.
    pub fn rename(&self, login: &str) {
        self.inner.lock().unwrap().login = login.to_owned();
    }

    /// The identity endpoint answers 500 from now on.
    pub fn fail_identity(&self) {
        self.inner.lock().unwrap().identity_fails = true;
    }

    /// Where `instance_url` points: this provider, under another host name.
    pub fn instance_url(&self) -> String {
        format!("http://localhost:{}", self.port)
    }
}

#[derive(serde::Deserialize)]
struct AuthorizeQuery {
    redirect_uri: String,
    state: String,
}

/// Approves at once and sends the browser back without `iss` (as GitHub does).
async fn authorize(Query(query): Query<AuthorizeQuery>) -> Redirect {
    let mut back = url::Url::parse(&query.redirect_uri).unwrap();
    back.query_pairs_mut().append_pair("code", "the-code").append_pair("state", &query.state);
    Redirect::to(back.as_str())
}

async fn token(State(provider): State<QuirkyProvider>) -> Response {
    let (answer, access) = {
        let mut inner = provider.inner.lock().unwrap();
        inner.token_requests += 1;
        let access = format!("gho_{}", uuid::Uuid::new_v4().simple());
        inner.issued.push(access.clone());
        (inner.answer, access)
    };
    let form = |body: String| {
        ([(header::CONTENT_TYPE, "application/x-www-form-urlencoded; charset=utf-8")], body).into_response()
    };
    match answer {
        Answer::GithubForm => form(format!("access_token={access}&scope=repo%2Cgist&token_type=bearer")),
        Answer::ErrorWith200 => form("error=bad_verification_code&error_description=The+code+is+wrong".into()),
        Answer::SlackNested => axum::Json(json!({
            "ok": true, "app_id": "A1", "team": {"id": "T1"},
            "authed_user": {"id": "U1", "scope": "repo,gist", "access_token": access, "token_type": "user"}
        }))
        .into_response(),
        Answer::SalesforceInstance => axum::Json(json!({
            "access_token": access, "token_type": "Bearer", "scope": "repo gist",
            "instance_url": provider.instance_url(), "issued_at": "1700000000000"
        }))
        .into_response(),
    }
}

fn bearer_ok(provider: &QuirkyProvider, headers: &HeaderMap) -> bool {
    let presented = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    presented.is_some_and(|t| provider.inner.lock().unwrap().issued.iter().any(|i| i == t))
}

/// GitHub's `/user`: a numeric id and a login.
async fn user(State(provider): State<QuirkyProvider>, headers: HeaderMap) -> Response {
    if !bearer_ok(&provider, &headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let inner = provider.inner.lock().unwrap();
    if inner.identity_fails {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    axum::Json(json!({"id": 4242, "login": inner.login, "type": "User"})).into_response()
}

/// Which host name the API was called under (the configured one, or the instance URL's).
async fn whoami(State(provider): State<QuirkyProvider>, headers: HeaderMap) -> Response {
    if !bearer_ok(&provider, &headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let host = headers.get("host").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    axum::Json(json!({"host": host})).into_response()
}
