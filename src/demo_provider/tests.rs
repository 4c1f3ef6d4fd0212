//! The demo provider driven through its router, one request at a time, with a fixed clock.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, Request, StatusCode};
use base64::Engine;
use secrecy::ExposeSecret;
use serde_json::Value;
use tower::ServiceExt;
use url::Url;

use crate::clock::ManualClock;
use crate::config::{Config, SettingsArgs};
use crate::pkce::s256;
use crate::state::AppState;

const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const REDIRECT: &str = "http://broker.test/oauth/callback";
const ISSUER: &str = "http://broker.test/demo-provider";

struct Demo {
    _dir: tempfile::TempDir,
    state: AppState,
    clock: ManualClock,
    router: Router,
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
    fn location(&self) -> Url {
        Url::parse(self.headers[LOCATION].to_str().unwrap()).unwrap()
    }
}

fn query(url: &Url, name: &str) -> Option<String> {
    url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

fn authorize_query(overrides: &[(&str, &str)]) -> String {
    let challenge = s256(VERIFIER);
    let mut params = vec![
        ("response_type", "code"),
        ("client_id", "oauth-broker-demo"),
        ("redirect_uri", REDIRECT),
        ("scope", "profile notes:read"),
        ("state", "st-1"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
    ];
    for (name, value) in overrides {
        params.retain(|(n, _)| n != name);
        if !value.is_empty() {
            params.push((name, value));
        }
    }
    url::form_urlencoded::Serializer::new(String::new()).extend_pairs(params).finish()
}

impl Demo {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let args = SettingsArgs {
            data_dir: Some(dir.path().to_path_buf()),
            public_url: Some(Url::parse("http://broker.test").unwrap()),
            demo: true,
            ..Default::default()
        };
        let config = Config::from_toml(&args, "").unwrap();
        let clock = ManualClock::new(1_700_000_000);
        let state = crate::app::build_state(config, Arc::new(clock.clone())).await.unwrap();
        // As `serve` does: with the watcher, live access tokens are kept between API calls
        // (token_cache), so every test below also checks that what is kept never outlives a
        // revocation or an expiry.
        state.core.store.watch_other_writers(state.shutdown.clone()).await;
        let router = super::router().with_state(state.clone());
        Self { _dir: dir, state, clock, router }
    }

    async fn send(&self, request: Request<Body>) -> Reply {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        Reply { status, headers, body }
    }

    async fn get(&self, uri: &str, bearer: Option<&str>) -> Reply {
        let mut request = Request::get(uri);
        if let Some(token) = bearer {
            request = request.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        self.send(request.body(Body::empty()).unwrap()).await
    }

    async fn post_form(&self, uri: &str, basic: bool, form: &[(&str, &str)]) -> Reply {
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        let mut request = Request::post(uri).header(CONTENT_TYPE, "application/x-www-form-urlencoded");
        if basic {
            let secret = self.state.demo_client_secret.as_ref().unwrap().expose_secret().to_owned();
            let credentials = base64::engine::general_purpose::STANDARD.encode(format!("oauth-broker-demo:{secret}"));
            request = request.header(AUTHORIZATION, format!("Basic {credentials}"));
        }
        self.send(request.body(Body::from(body)).unwrap()).await
    }

    /// Approves the default request as `alice` and returns the code.
    async fn code(&self, scope: &str) -> String {
        let challenge = s256(VERIFIER);
        let form = [
            ("response_type", "code"),
            ("client_id", "oauth-broker-demo"),
            ("redirect_uri", REDIRECT),
            ("scope", scope),
            ("state", "st-1"),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("account", "alice"),
            ("decision", "approve"),
        ];
        let reply = self.post_form("/authorize", false, &form).await;
        assert_eq!(reply.status, StatusCode::FOUND);
        let location = reply.location();
        assert_eq!(query(&location, "state").as_deref(), Some("st-1"));
        assert_eq!(query(&location, "iss").as_deref(), Some(ISSUER));
        query(&location, "code").unwrap()
    }

    async fn exchange(&self, code: &str, verifier: &str) -> Reply {
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", verifier),
        ];
        self.post_form("/token", true, &form).await
    }

    async fn refresh(&self, refresh_token: &str) -> Reply {
        self.post_form("/token", true, &[("grant_type", "refresh_token"), ("refresh_token", refresh_token)]).await
    }
}

fn tokens(reply: &Reply) -> (String, String) {
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    assert_eq!(reply.headers["cache-control"], "no-store");
    let json = reply.json();
    (json["access_token"].as_str().unwrap().to_owned(), json["refresh_token"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn an_unregistered_redirect_uri_gets_an_error_page_never_a_redirect() {
    let demo = Demo::new().await;
    for overrides in [
        [("redirect_uri", "https://evil.example/cb")],
        [("redirect_uri", "http://broker.test/oauth/callback/")],
        [("client_id", "someone-else")],
    ] {
        let reply = demo.get(&format!("/authorize?{}", authorize_query(&overrides)), None).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        assert!(!reply.headers.contains_key(LOCATION));
    }
}

#[tokio::test]
async fn other_authorize_errors_redirect_with_state_and_iss() {
    let demo = Demo::new().await;
    for (overrides, error) in [
        (vec![("code_challenge_method", "plain")], "invalid_request"),
        (vec![("code_challenge", "")], "invalid_request"),
        (vec![("response_type", "token")], "unsupported_response_type"),
        (vec![("scope", "profile admin")], "invalid_scope"),
    ] {
        let reply = demo.get(&format!("/authorize?{}", authorize_query(&overrides)), None).await;
        assert_eq!(reply.status, StatusCode::FOUND);
        let location = reply.location();
        assert!(location.as_str().starts_with(REDIRECT));
        assert_eq!(query(&location, "error").as_deref(), Some(error), "{overrides:?}");
        assert_eq!(query(&location, "state").as_deref(), Some("st-1"));
        assert_eq!(query(&location, "iss").as_deref(), Some(ISSUER));
    }
}

#[tokio::test]
async fn the_approve_page_carries_the_request_and_deny_answers_access_denied() {
    let demo = Demo::new().await;
    let page = demo.get(&format!("/authorize?{}", authorize_query(&[])), None).await;
    assert_eq!(page.status, StatusCode::OK);
    let html = String::from_utf8(page.body.to_vec()).unwrap();
    assert!(html.contains("name=\"state\" value=\"st-1\""));
    assert!(html.contains("action=\"/demo-provider/authorize\""));

    let mut form: Vec<(String, String)> =
        url::form_urlencoded::parse(authorize_query(&[]).as_bytes()).into_owned().collect();
    form.push(("decision".into(), "deny".into()));
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let reply = demo.post_form("/authorize", false, &form).await;
    assert_eq!(query(&reply.location(), "error").as_deref(), Some("access_denied"));
}

#[tokio::test]
async fn a_code_works_once_with_its_verifier_and_a_replay_revokes_what_it_issued() {
    let demo = Demo::new().await;
    let code = demo.code("profile notes:read").await;

    let wrong = demo.exchange(&code, &"a".repeat(43)).await;
    assert_eq!(wrong.status, StatusCode::BAD_REQUEST);
    assert_eq!(wrong.json()["error"], "invalid_grant");

    let first = demo.exchange(&code, VERIFIER).await;
    let (access, _refresh) = tokens(&first);
    assert_eq!(first.json()["scope"], "profile notes:read");
    let me = demo.get("/api/me", Some(&access)).await;
    assert_eq!(me.json()["account"], "alice");

    let replay = demo.exchange(&code, VERIFIER).await;
    assert_eq!(replay.json()["error"], "invalid_grant");
    let after = demo.get("/api/me", Some(&access)).await;
    assert_eq!(after.status, StatusCode::UNAUTHORIZED);
    assert_eq!(after.headers[WWW_AUTHENTICATE], "Bearer error=\"invalid_token\"");
}

#[tokio::test]
async fn codes_expire_after_sixty_seconds() {
    let demo = Demo::new().await;
    let code = demo.code("profile").await;
    demo.clock.advance(60);
    assert_eq!(demo.exchange(&code, VERIFIER).await.json()["error"], "invalid_grant");
}

#[tokio::test]
async fn the_token_endpoint_requires_client_authentication() {
    let demo = Demo::new().await;
    let code = demo.code("profile").await;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", REDIRECT),
        ("code_verifier", VERIFIER),
    ];
    let reply = demo.post_form("/token", false, &form).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert!(reply.headers[WWW_AUTHENTICATE].to_str().unwrap().starts_with("Basic"));
    let mut with_wrong_secret = form.to_vec();
    with_wrong_secret.extend([("client_id", "oauth-broker-demo"), ("client_secret", "nope")]);
    assert_eq!(demo.post_form("/token", false, &with_wrong_secret).await.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn refresh_rotates_and_reusing_an_old_refresh_token_revokes_the_family() {
    let demo = Demo::new().await;
    let code = demo.code("profile notes:read").await;
    let (_, refresh1) = tokens(&demo.exchange(&code, VERIFIER).await);

    let (access2, refresh2) = tokens(&demo.refresh(&refresh1).await);
    assert_ne!(refresh1, refresh2);
    assert_eq!(demo.get("/api/notes", Some(&access2)).await.status, StatusCode::OK);

    let reuse = demo.refresh(&refresh1).await;
    assert_eq!(reuse.json()["error"], "invalid_grant");
    assert_eq!(demo.get("/api/notes", Some(&access2)).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(demo.refresh(&refresh2).await.json()["error"], "invalid_grant");
}

#[tokio::test]
async fn refresh_may_narrow_the_scope_but_never_widen_it() {
    let demo = Demo::new().await;
    let code = demo.code("profile notes:read").await;
    let (_, refresh) = tokens(&demo.exchange(&code, VERIFIER).await);
    let form = [("grant_type", "refresh_token"), ("refresh_token", refresh.as_str()), ("scope", "notes:write")];
    assert_eq!(demo.post_form("/token", true, &form).await.json()["error"], "invalid_scope");
    let form = [("grant_type", "refresh_token"), ("refresh_token", refresh.as_str()), ("scope", "profile")];
    let narrowed = demo.post_form("/token", true, &form).await;
    let (access, _) = tokens(&narrowed);
    assert_eq!(narrowed.json()["scope"], "profile");
    let notes = demo.get("/api/notes", Some(&access)).await;
    assert_eq!(notes.status, StatusCode::FORBIDDEN);
    assert_eq!(notes.json()["error"], "insufficient_scope");
}

#[tokio::test]
async fn revoking_a_refresh_token_also_revokes_its_access_tokens() {
    let demo = Demo::new().await;
    let code = demo.code("profile").await;
    let (access, refresh) = tokens(&demo.exchange(&code, VERIFIER).await);
    assert_eq!(demo.get("/api/me", Some(&access)).await.status, StatusCode::OK);
    let reply =
        demo.post_form("/revoke", true, &[("token", refresh.as_str()), ("token_type_hint", "refresh_token")]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(demo.get("/api/me", Some(&access)).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(demo.post_form("/revoke", true, &[("token", "unknown")]).await.status, StatusCode::OK);
}

#[tokio::test]
async fn the_api_takes_tokens_from_the_header_only_and_echoes_what_it_got() {
    let demo = Demo::new().await;
    let code = demo.code("profile").await;
    let (access, _) = tokens(&demo.exchange(&code, VERIFIER).await);
    assert_eq!(demo.get(&format!("/api/me?access_token={access}"), None).await.status, StatusCode::BAD_REQUEST);
    assert_eq!(demo.get("/api/me", None).await.status, StatusCode::UNAUTHORIZED);

    let request = Request::put("/api/echo/a/b?x=1&y=2")
        .header(AUTHORIZATION, format!("Bearer {access}"))
        .header("x-demo-trace", "t1")
        .header("x-other", "hidden")
        .body(Body::from("payload"))
        .unwrap();
    let echo = demo.send(request).await.json();
    assert_eq!(echo["method"], "PUT");
    assert_eq!(echo["query"], "x=1&y=2");
    assert_eq!(echo["headers"], serde_json::json!({ "x-demo-trace": "t1" }));
    assert_eq!(echo["body"], "payload");
}

#[tokio::test]
async fn notes_are_written_and_read_back_for_the_token_account() {
    let demo = Demo::new().await;
    let code = demo.code("notes:read notes:write").await;
    let (access, _) = tokens(&demo.exchange(&code, VERIFIER).await);
    let post = |body: &'static str| {
        Request::post("/api/notes")
            .header(AUTHORIZATION, format!("Bearer {access}"))
            .header(CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .unwrap()
    };

    let created = demo.send(post(r#"{"text":"hello"}"#)).await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(created.json()["text"], "hello");
    assert_eq!(demo.send(post(r#"{"text":""}"#)).await.status, StatusCode::BAD_REQUEST);
    assert_eq!(demo.send(post(r#"{"text":"x","extra":1}"#)).await.status, StatusCode::BAD_REQUEST);

    let notes = demo.get("/api/notes", Some(&access)).await.json();
    assert_eq!(notes["notes"][0]["text"], "hello");
    assert!(notes["notes"][0].get("account").is_none());
    assert_eq!(demo.get("/api/me", Some(&access)).await.status, StatusCode::FORBIDDEN, "no profile scope");
}

impl Drop for Demo {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
    }
}

/// `/api/me` with `token` until it is answered without a database call (the token was kept),
/// bounded: on a loaded machine the watcher may be late and the cache not trusted for a while.
async fn until_kept(demo: &Demo, token: &str) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let before = demo.state.core.store.queries_run();
        assert_eq!(demo.get("/api/me", Some(token)).await.status, StatusCode::OK);
        if demo.state.core.store.queries_run() == before {
            return true;
        }
        tokio::task::yield_now().await;
    }
    false
}

#[tokio::test]
async fn a_kept_access_token_is_refused_at_once_when_revoked_or_expired() {
    let demo = Demo::new().await;
    let code = demo.code("profile").await;
    let (access, refresh) = tokens(&demo.exchange(&code, VERIFIER).await);
    assert!(until_kept(&demo, &access).await, "a live access token is kept between calls");

    // RFC 7009: the access token itself revoked.
    let reply = demo.post_form("/revoke", true, &[("token", access.as_str())]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(demo.get("/api/me", Some(&access)).await.status, StatusCode::UNAUTHORIZED);

    // A new one from the refresh token, kept, then past its lifetime on the injected clock.
    let (fresh, _) = tokens(&demo.refresh(&refresh).await);
    assert!(until_kept(&demo, &fresh).await);
    demo.clock.advance(super::token::ACCESS_TTL_SECS);
    assert_eq!(demo.get("/api/me", Some(&fresh)).await.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_revocation_made_by_another_process_reaches_a_kept_access_token() {
    let demo = Demo::new().await;
    let code = demo.code("profile").await;
    let (access, refresh) = tokens(&demo.exchange(&code, VERIFIER).await);
    assert!(until_kept(&demo, &access).await);

    // Another instance on the same database: its own store, sharing nothing with this one but
    // the database. It revokes the family (as its /revoke would for the refresh token).
    let other = crate::store::Store::connect(&demo.state.core.config.database_url).await.unwrap();
    let family =
        demo.state.core.store.demo().token(&crate::crypto::sha256_hex(&refresh)).await.unwrap().unwrap().family_id;
    assert_eq!(other.demo().revoke_family(&family, demo.state.core.now()).await.unwrap(), 2);

    assert!(until_refused(&demo, &access).await, "another process's revocation was never seen");
}

#[tokio::test]
async fn a_revocation_by_hand_written_sql_reaches_a_kept_access_token() {
    let demo = Demo::new().await;
    let code = demo.code("profile").await;
    let (access, _) = tokens(&demo.exchange(&code, VERIFIER).await);
    assert!(until_kept(&demo, &access).await);

    // An operator's own statement on a connection of its own: no store, only the database and
    // its triggers (migration 0017).
    use sqlx::Connection;
    let mut conn = sqlx::AnyConnection::connect(&demo.state.core.config.database_url).await.unwrap();
    let revoked = sqlx::query("UPDATE demo_tokens SET revoked_at = $1 WHERE token_hash = $2")
        .bind(demo.state.core.now())
        .bind(crate::crypto::sha256_hex(&access))
        .execute(&mut conn)
        .await
        .unwrap();
    assert_eq!(revoked.rows_affected(), 1);
    assert!(until_refused(&demo, &access).await, "a revocation by hand-written SQL was never seen");
}

/// `/api/me` with `token` until it is refused, bounded: seen once this instance's watcher reads
/// the counter the revocation moved.
async fn until_refused(demo: &Demo, token: &str) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match demo.get("/api/me", Some(token)).await.status {
            StatusCode::UNAUTHORIZED => return true,
            StatusCode::OK if std::time::Instant::now() < deadline => {
                tokio::time::sleep(crate::store::generations::POLL_EVERY).await;
            }
            _ => return false,
        }
    }
}
