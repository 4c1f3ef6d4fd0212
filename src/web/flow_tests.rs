//! The browser leg end to end, on a real listener with the strict demo provider: sign in,
//! consent, provider, callback — and the attacks each check stops. (The full product tests live
//! in `tests/api`; these pin the hosted pages' own contract.)

use std::sync::Arc;

use reqwest::StatusCode;
use reqwest::redirect::Policy;
use secrecy::SecretString;

use crate::clock::ManualClock;
use crate::config::{Config, SettingsArgs};
use crate::domain::{ElicitationId, Scopes};
use crate::identity::password::hash_password;
use crate::state::AppState;
use crate::store::authorizations::{AuthorizationKind, AuthorizationStatus, NewAuthorization};

struct TestApp {
    base: String,
    state: AppState,
    clock: ManualClock,
    _dir: tempfile::TempDir,
}

const PASSWORD: &str = "correct horse battery";

async fn spawn() -> TestApp {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let args = SettingsArgs {
        listen: Some(addr),
        database_url: Some(format!("sqlite://{}?mode=rwc", dir.path().join("db.sqlite").display())),
        data_dir: Some(dir.path().to_owned()),
        demo: true,
        ..Default::default()
    };
    let config = Config::from_toml(&args, "").unwrap();
    let clock = ManualClock::starting_now();
    let app = crate::App::build(config, Arc::new(clock.clone())).await.unwrap();
    let state = app.state().clone();
    tokio::spawn(app.run(listener, std::future::pending()));
    for name in ["alice", "bob"] {
        let hash = hash_password(&SecretString::from(PASSWORD.to_owned())).unwrap();
        state
            .core
            .store
            .users()
            .create_local(&state.core.config.issuer(), name, &hash, state.core.now())
            .await
            .unwrap();
    }
    TestApp { base: format!("http://{addr}"), state, clock, _dir: dir }
}

fn browser() -> reqwest::Client {
    reqwest::Client::builder().cookie_store(true).redirect(Policy::none()).build().unwrap()
}

fn hidden(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker).unwrap_or_else(|| panic!("no {name} in {html}")) + marker.len();
    html[start..].split('"').next().unwrap().to_owned()
}

fn location(response: &reqwest::Response) -> String {
    response.headers()["location"].to_str().unwrap().to_owned()
}

impl TestApp {
    /// Opens the provider's callback URL in `browser`: it must answer 303 to one of our own
    /// clean pages (no code, state or iss in the address), which is then opened and returned.
    async fn land(&self, browser: &reqwest::Client, callback: &str) -> reqwest::Response {
        let response = browser.get(callback).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "the callback never shows a page itself");
        let target = location(&response);
        assert!(target.starts_with('/') && !target.starts_with("//"), "{target}");
        assert!(!target.contains('?'), "{target}");
        let sent = url::Url::parse(callback).unwrap();
        for (_, value) in sent.query_pairs().filter(|(k, v)| (k == "code" || k == "state") && v.len() > 4) {
            assert!(!target.contains(value.as_ref()), "{target}");
        }
        browser.get(format!("{}{target}", self.base)).send().await.unwrap()
    }
}

impl TestApp {
    async fn login(&self, browser: &reqwest::Client, username: &str, password: &str, next: &str) -> reqwest::Response {
        let page = browser.get(format!("{}/login", self.base)).send().await.unwrap().text().await.unwrap();
        let csrf = hidden(&page, "csrf_token");
        let form = [("username", username), ("password", password), ("next", next), ("csrf_token", &csrf)];
        browser.post(format!("{}/login", self.base)).form(&form).send().await.unwrap()
    }

    async fn authorization(&self, user: &str) -> String {
        let user = self.state.core.store.users().by_username(user).await.unwrap().unwrap();
        let id = ElicitationId::generate();
        let now = self.state.core.now();
        let new = NewAuthorization {
            id: id.as_str(),
            user_id: &user.id,
            organization: &crate::domain::OrganizationId::default_organization(),
            provider: "demo",
            scopes: &Scopes::parse(["notes:read", "profile"]).unwrap(),
            client_name: Some("<b>Test Client</b>"),
            mcp_session: None,
            client_key: "token:flow-test",
            kind: AuthorizationKind::Connect,
            grant_id: None,
            server_id: None,
            expires_at: now + 600,
        };
        self.state.core.store.authorizations().create(&new, now).await.unwrap();
        id.to_string()
    }

    async fn status(&self, id: &str) -> AuthorizationStatus {
        self.state.core.store.authorizations().by_id(id).await.unwrap().unwrap().status
    }

    /// Consent page → Approve → the provider URL.
    async fn approve(&self, browser: &reqwest::Client, id: &str) -> String {
        let page = browser.get(format!("{}/connect/{id}", self.base)).send().await.unwrap().text().await.unwrap();
        let csrf = hidden(&page, "csrf_token");
        let form = [("csrf_token", csrf.as_str()), ("action", "approve")];
        let response = browser.post(format!("{}/connect/{id}", self.base)).form(&form).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        location(&response)
    }

    /// The demo provider approves; returns the callback URL it redirects to.
    async fn provider_approves(&self, authorize_url: &str) -> String {
        let url = url::Url::parse(authorize_url).unwrap();
        let mut form: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        form.push(("decision".into(), "approve".into()));
        form.push(("account".into(), "demo-user".into()));
        let response =
            browser().post(format!("{}/demo-provider/authorize", self.base)).form(&form).send().await.unwrap();
        assert!(response.status().is_redirection(), "{}", response.status());
        location(&response)
    }
}

#[tokio::test]
async fn the_owner_connects_and_the_callback_works_once() {
    let app = spawn().await;
    let id = app.authorization("alice").await;
    let alice = browser();

    let response = alice.get(format!("{}/connect/{id}", app.base)).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), format!("/login?next=/connect/{id}"));
    let response = app.login(&alice, "alice", PASSWORD, &format!("/connect/{id}")).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), format!("/connect/{id}"));

    let consent = alice.get(format!("{}/connect/{id}", app.base)).send().await.unwrap();
    assert_eq!(consent.headers()["cache-control"], "no-store");
    let consent = consent.text().await.unwrap();
    for expected in ["&#60;b&#62;Test Client", "Demo Provider", "notes:read", "profile", "127.0.0.1", "alice"] {
        assert!(consent.contains(expected), "consent page lacks {expected}");
    }
    assert_eq!(app.status(&id).await, AuthorizationStatus::Pending, "a GET changes nothing");

    let authorize_url = app.approve(&alice, &id).await;
    assert!(authorize_url.starts_with(&format!("{}/demo-provider/authorize?", app.base)));
    assert_eq!(app.status(&id).await, AuthorizationStatus::Redirected);
    let callback = app.provider_approves(&authorize_url).await;

    let mut events = app.state.core.events.subscribe();
    let done = app.land(&alice, &callback).await;
    assert_eq!(done.status(), StatusCode::OK);
    assert_eq!(done.url().path(), format!("/connect/{id}/result"));
    assert_eq!(done.headers()["referrer-policy"], "no-referrer");
    assert!(done.text().await.unwrap().contains("Connected to Demo Provider"));
    assert_eq!(app.status(&id).await, AuthorizationStatus::Completed);
    let event = events.try_recv().unwrap();
    assert_eq!((event.authorization_id.as_str(), event.status.as_str()), (id.as_str(), "completed"));
    let alice_id = app.state.core.store.users().by_username("alice").await.unwrap().unwrap().id;
    let grant = app.state.core.store.grants().latest(&alice_id, "demo", None).await.unwrap().unwrap();
    // The client that asked may use the new connection; no other client may.
    let consent =
        app.state.core.store.consents().find(&grant.id, "token:flow-test").await.unwrap().expect("consent recorded");
    assert!(consent.covers(&grant.scopes));
    assert!(app.state.core.store.consents().find(&grant.id, "token:").await.unwrap().is_none());

    let replay = app.land(&alice, &callback).await;
    assert_eq!(replay.status(), StatusCode::BAD_REQUEST);
    let again = alice.get(format!("{}/connect/{id}", app.base)).send().await.unwrap();
    assert!(again.text().await.unwrap().contains("Already connected"));
}

#[tokio::test]
async fn a_forwarded_link_is_refused_to_another_account_and_nothing_changes() {
    let app = spawn().await;
    let id = app.authorization("alice").await;
    let (alice, bob) = (browser(), browser());
    app.login(&alice, "alice", PASSWORD, "/").await;
    app.login(&bob, "bob", PASSWORD, "/").await;

    let page = bob.get(format!("{}/connect/{id}", app.base)).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::FORBIDDEN);
    let bob_csrf = hidden(&page.text().await.unwrap(), "csrf_token");
    let form = [("csrf_token", bob_csrf.as_str()), ("action", "approve")];
    let post = bob.post(format!("{}/connect/{id}", app.base)).form(&form).send().await.unwrap();
    assert_eq!(post.status(), StatusCode::FORBIDDEN);
    assert_eq!(app.status(&id).await, AuthorizationStatus::Pending);

    // Alice's own form with a wrong token is refused too.
    let form = [("csrf_token", bob_csrf.as_str()), ("action", "deny")];
    let post = alice.post(format!("{}/connect/{id}", app.base)).form(&form).send().await.unwrap();
    assert_eq!(post.status(), StatusCode::FORBIDDEN);
    assert_eq!(app.status(&id).await, AuthorizationStatus::Pending);
}

#[tokio::test]
async fn a_callback_in_another_browser_or_from_another_issuer_makes_no_token_request() {
    let app = spawn().await;
    let id = app.authorization("alice").await;
    let (alice, bob) = (browser(), browser());
    app.login(&alice, "alice", PASSWORD, "/").await;
    app.login(&bob, "bob", PASSWORD, "/").await;
    let callback = app.provider_approves(&app.approve(&alice, &id).await).await;

    for other in [&bob, &browser()] {
        assert_eq!(app.land(other, &callback).await.status(), StatusCode::BAD_REQUEST);
    }
    let forged = callback.replace("iss=", "iss=https%3A%2F%2Fevil.example&x=");
    assert_eq!(app.land(&alice, &forged).await.status(), StatusCode::BAD_REQUEST);
    let no_iss: String = callback.split('&').filter(|p| !p.starts_with("iss=")).collect::<Vec<_>>().join("&");
    assert_eq!(app.land(&alice, &no_iss).await.status(), StatusCode::BAD_REQUEST);
    let no_state = format!("{}/oauth/callback?code=x", app.base);
    assert_eq!(app.land(&alice, &no_state).await.status(), StatusCode::BAD_REQUEST);
    assert_eq!(app.status(&id).await, AuthorizationStatus::Redirected, "nothing was consumed");

    assert_eq!(app.land(&alice, &callback).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn expired_links_and_declines_end_the_request() {
    let app = spawn().await;
    let (expiring, declined) = (app.authorization("alice").await, app.authorization("alice").await);
    let alice = browser();
    app.login(&alice, "alice", PASSWORD, "/").await;

    let page = alice.get(format!("{}/connect/{declined}", app.base)).send().await.unwrap().text().await.unwrap();
    let form = [("csrf_token", hidden(&page, "csrf_token")), ("action", "deny".into())];
    let response = alice.post(format!("{}/connect/{declined}", app.base)).form(&form).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(app.status(&declined).await, AuthorizationStatus::Declined);

    app.clock.advance(601);
    let response = alice.get(format!("{}/connect/{expiring}", app.base)).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::GONE);
    let response = alice.get(format!("{}/connect/not-a-valid-id", app.base)).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn sign_in_fails_generically_is_throttled_and_never_redirects_off_site() {
    let app = spawn().await;
    let browser = browser();
    let response = app.login(&browser, "alice", PASSWORD, "//evil.example/").await;
    assert_eq!(location(&response), "/");
    let cookie = response.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.starts_with("oauth_broker_session=") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax")
    );

    let unknown = app.login(&browser, "nobody", PASSWORD, "/").await;
    assert_eq!(unknown.status(), StatusCode::UNAUTHORIZED);
    assert!(unknown.text().await.unwrap().contains("Wrong username or password."));
    for _ in 0..5 {
        assert_eq!(app.login(&browser, "bob", "wrong password", "/").await.status(), StatusCode::UNAUTHORIZED);
    }
    assert_eq!(app.login(&browser, "bob", PASSWORD, "/").await.status(), StatusCode::TOO_MANY_REQUESTS);
    app.clock.advance(300);
    assert_eq!(app.login(&browser, "bob", PASSWORD, "/").await.status(), StatusCode::SEE_OTHER);

    let no_cookie = reqwest::Client::builder().redirect(Policy::none()).build().unwrap();
    let form = [("username", "bob"), ("password", PASSWORD), ("next", "/"), ("csrf_token", "x")];
    let forged = no_cookie.post(format!("{}/login", app.base)).form(&form).send().await.unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_provider_refusal_fails_the_row_and_signing_out_ends_the_session() {
    let app = spawn().await;
    let id = app.authorization("alice").await;
    let alice = browser();
    app.login(&alice, "alice", PASSWORD, "/").await;
    let url = url::Url::parse(&app.approve(&alice, &id).await).unwrap();
    let mut form: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    form.push(("decision".into(), "deny".into()));
    let denied = browser().post(format!("{}/demo-provider/authorize", app.base)).form(&form).send().await.unwrap();
    let page = app.land(&alice, &location(&denied)).await;
    assert_eq!(page.status(), StatusCode::BAD_REQUEST);
    assert!(page.text().await.unwrap().contains("access_denied"));
    let row = app.state.core.store.authorizations().by_id(&id).await.unwrap().unwrap();
    assert_eq!(
        (row.status, row.failure.as_deref()),
        (AuthorizationStatus::Failed, Some("provider_error:access_denied"))
    );

    let home = alice.get(format!("{}/", app.base)).send().await.unwrap().text().await.unwrap();
    let csrf = hidden(&home, "csrf_token");
    let bad = alice.post(format!("{}/logout", app.base)).form(&[("csrf_token", "nope")]).send().await.unwrap();
    assert_eq!(bad.status(), StatusCode::FORBIDDEN);
    let out = alice.post(format!("{}/logout", app.base)).form(&[("csrf_token", csrf.as_str())]).send().await.unwrap();
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert!(out.headers()["set-cookie"].to_str().unwrap().contains("Max-Age=0"));
    let home = alice.get(format!("{}/", app.base)).send().await.unwrap().text().await.unwrap();
    assert!(home.contains("not signed in"));
}

#[tokio::test]
async fn a_verifier_that_no_longer_opens_ends_the_attempt_with_a_way_forward_not_a_500() {
    let app = spawn().await;
    let id = app.authorization("alice").await;
    let alice = browser();
    app.login(&alice, "alice", PASSWORD, &format!("/connect/{id}")).await;
    let authorize_url = app.approve(&alice, &id).await;
    let row = app.state.core.store.authorizations().by_id(&id).await.unwrap().unwrap();
    let mut tampered = row.pkce_verifier_sealed.clone().unwrap();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x01;
    sqlx::query("UPDATE authorizations SET pkce_verifier_sealed = $1 WHERE id = $2")
        .bind(tampered)
        .bind(&id)
        .execute(app.state.core.store.pool())
        .await
        .unwrap();
    let callback = app.provider_approves(&authorize_url).await;

    let page = app.land(&alice, &callback).await;
    assert_eq!(page.status(), StatusCode::BAD_REQUEST);
    assert!(page.text().await.unwrap().contains("Start again from your MCP client"));
    assert_eq!(app.status(&id).await, AuthorizationStatus::Failed);
    let row = app.state.core.store.authorizations().by_id(&id).await.unwrap().unwrap();
    assert_eq!(row.failure.as_deref(), Some("verifier_unreadable"));
}
