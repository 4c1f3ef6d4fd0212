//! Issue 28: the token API's caches (the service row, the verified subject token, the user, the
//! grant and the consent) never outlive a change made on another instance. Instance A runs in
//! this process, instance B is the real binary on A's PostgreSQL database
//! ([`crate::helpers::cluster::OtherInstance`]), as behind a load balancer.
//!
//! Each test has both instances answer the same request twice on each face (`/v1/tokens`, the
//! RFC 8693 exchange at `/token` and a call through `/v1/proxy`), so each answers it from its
//! caches; then changes the
//! truth the way a user, an admin or an MCP client does, on one instance; then requires that
//! instance to refuse the very next request, and the other to refuse within
//! [`OTHER_INSTANCE_WITHIN`]. A change the operator makes with the admin CLI (another process)
//! is awaited on both. PostgreSQL only: instances share nothing else; without PostgreSQL each
//! test prints `SKIPPED postgres` (and fails under `REQUIRE_POSTGRES=1`). One pair of instances
//! per test, so each starts from a database of its own.

use std::sync::LazyLock;
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::authorization_server::{TOOL_SERVER, register_public_client, tool_server_tokens};
use crate::helpers::cli::admin_elsewhere;
use crate::helpers::cluster::OtherInstance;
use crate::helpers::token_api::{ServiceCredentials, ServiceOptions, register_service};
use crate::helpers::{ALICE, Backend, PASSWORD, TestApp, eventually, hidden_field, location, spawn_app, urlencode};

/// How long the instance that did not make a change may take to see it. Its watcher reads the
/// database's counter every 50 ms and its caches are not used once a read is 500 ms late
/// (`src/store/machinery/generations.rs`), so a change is seen within about half a second even
/// when the watcher is starved; this bounds a broken test and is not waited when things work.
const OTHER_INSTANCE_WITHIN: Duration = Duration::from_secs(2);

/// The two ways a service asks for a user's provider token.
#[derive(Debug, Clone, Copy)]
enum Face {
    /// `POST /v1/tokens`, problems as RFC 9457 documents.
    Tokens,
    /// RFC 8693 token exchange at `POST /token`, problems in RFC 6749 §5.2 shape.
    Exchange,
    /// `GET /v1/proxy/demo/me`: the broker calls the provider with the user's token, which never
    /// leaves it; problems as for `/v1/tokens`.
    Proxy,
}

const FACES: [Face; 3] = [Face::Tokens, Face::Exchange, Face::Proxy];

/// What a token request was answered, as a service tells answers apart: served, or refused
/// with a status, a problem code and (for `authorization_required`) a reason.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    status: u16,
    code: Option<String>,
    reason: Option<String>,
}

/// A provider token was handed out.
fn served() -> Answer {
    Answer { status: 200, code: None, reason: None }
}

fn refused(status: u16, code: &str, reason: Option<&str>) -> Answer {
    Answer { status, code: Some(code.to_owned()), reason: reason.map(str::to_owned) }
}

/// One client for every request of these tests (no cookies, no redirects).
static HTTP: LazyLock<reqwest::Client> = LazyLock::new(|| {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
});

/// `service` asks the instance at `base` for the holder of `subject`'s demo token, on `face`.
async fn ask(base: &str, face: Face, service: &ServiceCredentials, subject: &str) -> Answer {
    let request = match face {
        Face::Tokens => HTTP
            .post(format!("{base}/v1/tokens"))
            .json(&json!({"subject_token": subject, "provider": "demo", "scopes": ["profile"]})),
        Face::Exchange => HTTP.post(format!("{base}/token")).form(&[
            ("grant_type", oauth_broker::authorization_server::token_exchange::GRANT_TYPE),
            ("subject_token", subject),
            ("subject_token_type", oauth_broker::authorization_server::token_exchange::ACCESS_TOKEN_TYPE),
            ("provider", "demo"),
            ("scope", "profile"),
        ]),
        Face::Proxy => {
            HTTP.get(format!("{base}/v1/proxy/demo/me")).header(oauth_broker::api::proxy::SUBJECT_TOKEN_HEADER, subject)
        }
    };
    let response = request.basic_auth(&service.client_id, Some(&service.secret)).send().await.unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if status == 200 {
        match face {
            Face::Tokens | Face::Exchange => {
                assert!(body["access_token"].as_str().is_some_and(|t| !t.is_empty()), "{face:?}: a token: {body}")
            }
            // The demo provider's answer about the account whose token the broker sent.
            Face::Proxy => assert!(body.is_object() && body != json!({}), "{face:?}: the provider's answer: {body}"),
        }
        return served();
    }
    let code = match face {
        Face::Tokens | Face::Proxy => body["type"].as_str().and_then(|t| t.strip_prefix("urn:oauth-broker:problem:")),
        Face::Exchange => body["error"].as_str(),
    };
    Answer { status, code: code.map(str::to_owned), reason: body["reason"].as_str().map(str::to_owned) }
}

/// Two instances on one database; a tool server registered for the demo provider; Alice's MCP
/// client holding an access token for the tool server (from the broker's authorization server,
/// so it can be revoked); her demo account connected and the tool server allowed to use it.
struct Setup {
    a: TestApp,
    b: OtherInstance,
    service: ServiceCredentials,
    /// Alice's access token for the tool server: what the service presents as `subject_token`.
    subject: String,
    /// The MCP client that holds `subject`.
    client_id: String,
    /// Alice's browser, signed in at A.
    alice_on_a: reqwest::Client,
}

impl Setup {
    async fn start() -> Option<Self> {
        let a = spawn_app(Backend::Postgres).await?;
        let b = OtherInstance::start(&a, "").await;
        let options = ServiceOptions { resource: Some(TOOL_SERVER), ..Default::default() };
        let service = register_service(&a, "notes", &["demo"], options).await;
        let client_id = register_public_client(&a, "Notes Client").await;
        let (subject, _) = tool_server_tokens(&a, &client_id).await;
        // Not connected yet: the answer links to the flow that connects and allows at once.
        let first = HTTP
            .post(a.url("/v1/tokens"))
            .basic_auth(&service.client_id, Some(&service.secret))
            .json(&json!({"subject_token": subject, "provider": "demo", "scopes": ["profile"]}))
            .send()
            .await
            .unwrap();
        assert_eq!(first.status(), 409);
        let body: Value = first.json().await.unwrap();
        assert_eq!(body["reason"], "not_connected", "{body}");
        let link = body["authorization"]["url"].as_str().unwrap().to_owned();
        let alice_on_a = signed_in_at(&a.address, ALICE).await;
        assert_eq!(a.approve_in_browser(&alice_on_a, &link, ALICE).await.status(), 200);
        Some(Self { a, b, service, subject, client_id, alice_on_a })
    }

    /// Both instances, named for messages.
    fn instances(&self) -> [(&'static str, &str); 2] {
        [("A", &self.a.address), ("B", &self.b.address)]
    }

    /// Both instances serve `service`'s request twice on each face, alternately: from then on
    /// each answers it from its caches.
    async fn served_by_both(&self, service: &ServiceCredentials) {
        for round in 1..=2 {
            for (name, base) in self.instances() {
                for face in FACES {
                    let answer = ask(base, face, service, &self.subject).await;
                    assert_eq!(answer, served(), "{name} serves {face:?} (round {round})");
                }
            }
        }
    }

    async fn stop(self) {
        drop(self.b);
        self.a.stop().await;
    }
}

/// The instance at `base` refuses the very next request on each face, with no wait: it made the
/// change itself.
async fn refused_at_once(name: &str, base: &str, service: &ServiceCredentials, subject: &str, expected: &Answer) {
    for face in FACES {
        assert_eq!(ask(base, face, service, subject).await, *expected, "{name} refuses {face:?} at once");
    }
}

/// The instance at `base` refuses within [`OTHER_INSTANCE_WITHIN`]: until then it may still
/// serve (from its caches) but answer nothing else; once it refused, the other face is
/// refused too.
async fn refused_soon(name: &str, base: &str, service: &ServiceCredentials, subject: &str, expected: &Answer) {
    let what = format!("{name} refuses with {expected:?}");
    eventually(&what, OTHER_INSTANCE_WITHIN, || async {
        let answer = ask(base, Face::Tokens, service, subject).await;
        assert!(answer == served() || answer == *expected, "{name} answered neither: {answer:?}");
        if answer == *expected { Ok(()) } else { Err(format!("{answer:?}")) }
    })
    .await;
    for face in [Face::Exchange, Face::Proxy] {
        assert_eq!(ask(base, face, service, subject).await, *expected, "{name} refuses {face:?} too");
    }
}

/// A browser signed in as `name` at the instance at `base` (sessions live in the database, so
/// either instance's pages serve it).
async fn signed_in_at(base: &str, name: &str) -> reqwest::Client {
    let browser = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let page = browser.get(format!("{base}/login?next={}", urlencode("/connections"))).send().await.unwrap();
    let csrf = hidden_field(&page.text().await.unwrap(), "csrf_token").expect("a login form");
    let form = [("username", name), ("password", PASSWORD), ("next", "/connections"), ("csrf_token", &csrf)];
    let answer = browser.post(format!("{base}/login")).form(&form).send().await.unwrap();
    assert_eq!(answer.status(), 303, "{name} signs in at {base}");
    browser
}

/// The session's CSRF token, from the page at `url`.
async fn csrf_on(browser: &reqwest::Client, url: &str) -> String {
    let page = browser.get(url).send().await.unwrap();
    assert_eq!(page.status(), 200, "{url}");
    hidden_field(&page.text().await.unwrap(), "csrf_token").expect("a signed-in page carries the CSRF token")
}

/// Alice's demo connection.
async fn demo_grant_id(app: &TestApp) -> String {
    let grants = app.state.core.store.grants().for_user(&app.user_id(ALICE).await).await.unwrap();
    grants.into_iter().find(|g| g.provider == "demo").expect("alice's demo connection").id
}

// RFC 7009: Alice's MCP client signs out, which revokes the token it handed the tool server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subject_token_revoked_through_instance_a_is_refused_by_both_instances() {
    let Some(setup) = Setup::start().await else { return };
    let Setup { a, b, service, subject, .. } = &setup;
    setup.served_by_both(service).await;

    // Act: the client revokes its token at A.
    let form = [("client_id", setup.client_id.as_str()), ("token", subject.as_str())];
    assert_eq!(HTTP.post(a.url("/revoke")).form(&form).send().await.unwrap().status(), 200);

    // Assert
    let expected = refused(401, "invalid_subject_token", None);
    refused_at_once("A", &a.address, service, subject, &expected).await;
    refused_soon("B", &b.address, service, subject, &expected).await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_disabled_on_the_admin_pages_of_instance_a_is_refused_by_both_instances() {
    let Some(setup) = Setup::start().await else { return };
    let Setup { a, b, service, subject, .. } = &setup;
    // Arrange: the admin signed in (making Bob admin writes his user row) before the caches fill.
    let admin = crate::helpers::admin::admin_browser(a).await;
    let csrf = csrf_on(&admin, &a.url("/admin/users?q=alice")).await;
    setup.served_by_both(service).await;

    // Act
    let alice = a.user_id(ALICE).await;
    let form = [("csrf_token", csrf.as_str()), ("user_id", alice.as_str()), ("disabled", "true")];
    let disabled = admin.post(a.url("/admin/users/disable")).form(&form).send().await.unwrap();
    assert_eq!(location(&disabled), "/admin/users?notice=disabled");

    // Assert
    let expected = refused(401, "invalid_subject_token", None);
    refused_at_once("A", &a.address, service, subject, &expected).await;
    refused_soon("B", &b.address, service, subject, &expected).await;
    setup.stop().await;
}

// The operator rotates a secret with the admin CLI, another process: both instances let the old
// one go within the bound, and the new one works on both at once after that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_rotated_with_the_admin_cli_is_refused_by_both_instances_and_the_new_one_served() {
    let Some(setup) = Setup::start().await else { return };
    let Setup { a, service, subject, .. } = &setup;
    setup.served_by_both(service).await;

    // Act
    let printed = admin_elsewhere(a, &["services", "rotate-secret", "notes", "--json"]).await;
    let printed: Value = serde_json::from_str(&printed).unwrap();
    let rotated = ServiceCredentials {
        secret: printed["client_secret"].as_str().expect("the new secret").to_owned(),
        ..service.clone()
    };

    // Assert
    let expected = refused(401, "invalid_client", None);
    for (name, base) in setup.instances() {
        refused_soon(name, base, service, subject, &expected).await;
    }
    for (name, base) in setup.instances() {
        for face in FACES {
            assert_eq!(ask(base, face, &rotated, subject).await, served(), "{name} serves the new secret on {face:?}");
        }
    }
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_removed_with_the_admin_cli_is_refused_by_both_instances() {
    let Some(setup) = Setup::start().await else { return };
    let Setup { a, service, subject, .. } = &setup;
    setup.served_by_both(service).await;

    // Act
    admin_elsewhere(a, &["services", "remove", "notes"]).await;

    // Assert
    let expected = refused(401, "invalid_client", None);
    for (name, base) in setup.instances() {
        refused_soon(name, base, service, subject, &expected).await;
    }
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consent_withdrawn_on_the_connections_page_of_instance_a_is_refused_by_both_instances() {
    let Some(setup) = Setup::start().await else { return };
    let Setup { a, b, service, subject, alice_on_a: alice, .. } = &setup;
    let csrf = csrf_on(alice, &a.url("/connections")).await;
    let grant_id = demo_grant_id(a).await;
    setup.served_by_both(service).await;

    // Act: Alice withdraws the tool server's access to her demo connection.
    let client_key = format!("service:{}", service.client_id);
    let form = [("csrf_token", csrf.as_str()), ("grant_id", grant_id.as_str()), ("client_key", client_key.as_str())];
    let withdrawn = alice.post(a.url("/connections/clients/revoke")).form(&form).send().await.unwrap();
    assert_eq!(location(&withdrawn), "/connections");

    // Assert: the tool server must send her to allow it again.
    let expected = refused(409, "authorization_required", Some("consent_required"));
    refused_at_once("A", &a.address, service, subject, &expected).await;
    refused_soon("B", &b.address, service, subject, &expected).await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_disconnected_on_the_connections_page_of_instance_a_is_refused_by_both_instances() {
    let Some(setup) = Setup::start().await else { return };
    let Setup { a, b, service, subject, alice_on_a: alice, .. } = &setup;
    let csrf = csrf_on(alice, &a.url("/connections")).await;
    let grant_id = demo_grant_id(a).await;
    setup.served_by_both(service).await;

    // Act: Alice disconnects her demo account (the grant is revoked at the provider and here).
    let form = [("csrf_token", csrf.as_str()), ("grant_id", grant_id.as_str())];
    let disconnected = alice.post(a.url("/connections/revoke")).form(&form).send().await.unwrap();
    assert!(location(&disconnected).starts_with("/connections?revocation="), "{}", location(&disconnected));

    // Assert
    let expected = refused(409, "authorization_required", Some("not_connected"));
    refused_at_once("A", &a.address, service, subject, &expected).await;
    refused_soon("B", &b.address, service, subject, &expected).await;
    setup.stop().await;
}

// The other way round: the change is made through B's pages, and A, whose caches B cannot
// touch, follows within the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consent_withdrawn_on_the_connections_page_of_instance_b_is_refused_by_b_at_once_and_then_by_a() {
    let Some(setup) = Setup::start().await else { return };
    let Setup { a, b, service, subject, .. } = &setup;
    let alice = signed_in_at(&b.address, ALICE).await;
    let csrf = csrf_on(&alice, &format!("{}/connections", b.address)).await;
    let grant_id = demo_grant_id(a).await;
    setup.served_by_both(service).await;

    // Act
    let client_key = format!("service:{}", service.client_id);
    let form = [("csrf_token", csrf.as_str()), ("grant_id", grant_id.as_str()), ("client_key", client_key.as_str())];
    let withdrawn = alice.post(format!("{}/connections/clients/revoke", b.address)).form(&form).send().await.unwrap();
    assert_eq!(location(&withdrawn), "/connections");

    // Assert
    let expected = refused(409, "authorization_required", Some("consent_required"));
    refused_at_once("B", &b.address, service, subject, &expected).await;
    refused_soon("A", &a.address, service, subject, &expected).await;
    setup.stop().await;
}
