//! Upgrading from the build before 0.1.0 (issue 30): a database made by that build — one shared
//! `/oauth/callback` for every provider — is migrated by this binary's `migrate`, as the
//! CHANGELOG's upgrade notes say, and everything it held goes on.
//!
//! The fixtures in `tests/fixtures/upgrade/` were made by that build itself (their README says
//! how): alice connected to the demo provider (a call made through the broker); bob half
//! way through a connect, already sent to the provider with the shared callback when the old
//! build stopped. After `migrate` and a start of this build with the same key and public URL:
//! - `migrate --status` named the pending migrations, `migrate` applied them, and
//!   `providers list` prints the per-provider redirect URI to register (upgrade note 1);
//! - alice's grant, sealed by the old build, works without asking her again, and refreshes with
//!   the old refresh token;
//! - bob's connect, sent with the shared callback before the upgrade, completes there;
//! - a connect started after the upgrade goes out with `/oauth/callback/demo` and completes.

use secrecy::SecretString;
use serde_json::json;

use crate::helpers::upgrade::Fixture;
use crate::helpers::*;

async fn upgrade_from_the_build_before_0_1_0(backend: Backend) {
    let fixture = Fixture::load("upgrade", backend);
    let Some(db) = fixture.restore(backend).await else { return };
    let public_url = fixture.text("public_url");

    // Upgrade note 2: migrate first. The old build had applied 1 to 8; the per-provider
    // callbacks came with 11.
    let status = fixture.operator(&db.url, &["migrate", "--status"]);
    assert!(status.contains("8  applied") && status.contains("11  pending  provider callbacks"), "{status}");
    fixture.operator(&db.url, &["migrate"]);
    let status = fixture.operator(&db.url, &["migrate", "--status"]);
    assert!(status.contains(" 0 pending"), "nothing left pending: {status}");

    // Upgrade note 1: the redirect URI to register, per provider.
    // An operator whose broker.toml enables GitHub is told what to add at GitHub.
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("broker.toml");
    std::fs::write(&config, "[providers.github]\nclient_id = \"id\"\nclient_secret = \"secret\"\n").unwrap();
    let providers = fixture.operator(&db.url, &["--config", config.to_str().unwrap(), "providers", "list"]);
    let github = providers.lines().find(|line| line.starts_with("github ")).unwrap_or_default();
    assert!(github.ends_with(&format!("{public_url}/oauth/callback/github")), "{providers}");

    // This build starts on the old database, with the old key and public URL, a minute after
    // the old one stopped (bob's connect is still in flight).
    let app = spawn_app_opts(
        backend,
        SpawnOptions {
            instance_of: Some(Instance {
                database_url: db.url.clone(),
                encryption_key: SecretString::from(fixture.text("encryption_key")),
                public_url: public_url.clone(),
            }),
            clock_at: Some(fixture.facts["now"].as_i64().unwrap() + 60),
            // Its public URL's own address: the demo provider is served there. A port below
            // the ephemeral range, so no other test's connection holds it.
            listen: Some(public_url.strip_prefix("http://").unwrap().parse().unwrap()),
            ..Default::default()
        },
        |builder| builder,
    )
    .await
    .unwrap();
    assert_eq!(app.user_id(ALICE).await, fixture.text("alice_id"), "the same users");

    // Alice: her grant and her consent for this client are still there.
    let alice = app.mcp_client(ALICE, ClientKind::Url).await;
    let me = json!({"provider": "demo", "method": "GET", "path": "/me"});
    let answered = alice.call("provider_request", me.clone()).await.expect("no new consent for alice");
    assert_ne!(answered.is_error, Some(true), "{answered:?}");
    assert!(format!("{answered:?}").contains("demo-user"), "{answered:?}");

    // Bob: his browser, at the provider when the old build stopped, comes back to the shared
    // callback, which still completes the connect.
    let browser = browser_with_cookies(&app, &fixture);
    let provider_url = fixture.text("bob_provider_url");
    assert!(provider_url.contains("oauth%2Fcallback&") || provider_url.ends_with("oauth%2Fcallback"), "{provider_url}");
    let callback = app.demo_provider_redirect(&browser, &provider_url, "demo-user", "approve").await;
    assert!(callback.starts_with(&format!("{public_url}/oauth/callback?")), "{callback}");
    let landed = app.land(&browser, &callback).await;
    let status = landed.status();
    assert_eq!(status, 200, "{}", landed.text().await.unwrap());
    let bob = app.mcp_client(BOB, ClientKind::Url).await;
    let bobs = bob.call("provider_request", me.clone()).await.expect("bob is connected");
    assert_ne!(bobs.is_error, Some(true), "{bobs:?}");

    // Past the old access token's life (bob's link would have expired by then): the old
    // refresh token, sealed by the old build, refreshes.
    app.clock.advance(3 * 3600);
    let refreshed = alice.call("provider_request", me).await.expect("refreshed");
    assert_ne!(refreshed.is_error, Some(true), "{refreshed:?}");
    assert!(format!("{refreshed:?}").contains("demo-user"), "{refreshed:?}");
    alice.close().await;

    // A connect started after the upgrade goes out with the provider's own callback.
    let connect =
        bob.call("connect_account", json!({"provider": "demo", "account": "second-user", "scopes": ["notes:read"]}));
    let browse = async {
        let (connect_url, _) = bob.next_url_elicitation().await;
        let path = connect_url.strip_prefix(&app.address).unwrap().to_owned();
        let fresh = app.browser();
        assert_eq!(fresh.get(&connect_url).send().await.unwrap().status(), 303, "sign in first");
        assert_eq!(app.sign_in(&fresh, BOB, &path).await.status(), 303);
        let consent = fresh.get(&connect_url).send().await.unwrap().text().await.unwrap();
        let csrf = hidden_field(&consent, "csrf_token").unwrap();
        let approved = fresh
            .post(&connect_url)
            .form(&[("csrf_token", csrf.as_str()), ("action", "approve")])
            .send()
            .await
            .unwrap();
        assert_eq!(approved.status(), 303, "to the provider");
        let provider_url = location(&approved);
        assert!(provider_url.contains("oauth%2Fcallback%2Fdemo"), "the provider's own callback: {provider_url}");
        assert_eq!(app.approve_at_demo_provider(&fresh, &provider_url, "second-user").await.status(), 200);
    };
    let (connected, ()) = tokio::join!(connect, browse);
    assert_ne!(connected.expect("connect_account answers").is_error, Some(true));
    let second = bob
        .call("provider_request", json!({"provider": "demo", "account": "second-user", "method": "GET", "path": "/me"}))
        .await
        .expect("the second account is connected");
    assert_ne!(second.is_error, Some(true), "{second:?}");
    assert!(format!("{second:?}").contains("second-user"), "{second:?}");
    bob.close().await;
    app.stop().await;
    db.drop_now().await;
}

/// A browser holding the session cookie bob had when the old build stopped.
fn browser_with_cookies(app: &TestApp, fixture: &Fixture) -> reqwest::Client {
    let jar = std::sync::Arc::new(reqwest::cookie::Jar::default());
    let origin: reqwest::Url = app.address.parse().unwrap();
    for cookie in fixture.facts["bob_cookies"].as_array().unwrap() {
        jar.add_cookie_str(cookie.as_str().unwrap(), &origin);
    }
    reqwest::Client::builder()
        .cookie_provider(jar)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sqlite_database_of_the_build_before_0_1_0_upgrades_and_goes_on() {
    upgrade_from_the_build_before_0_1_0(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_of_the_build_before_0_1_0_upgrades_and_goes_on() {
    upgrade_from_the_build_before_0_1_0(Backend::Postgres).await;
}
