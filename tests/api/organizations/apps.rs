//! Bring your own OAuth app: each organization connects its members through its own client at
//! the provider, set by the operator's CLI (`admin orgs apps set`), with the demo provider's
//! registered clients (`admin demo add-client`) as the provider's side. The demo provider checks
//! every client strictly (a code or refresh token of one client is refused to another), so a
//! grant that refreshes with the wrong app fails here.

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::helpers::cli::{admin_elsewhere, broker_for};
use crate::helpers::pages::location;
use crate::helpers::strict_provider::StrictProvider;
use crate::helpers::token_api::{ServiceCredentials, ServiceOptions, app_with, register_service};
use crate::helpers::*;
use crate::on_both_backends;

/// `admin ARGS` with `stdin` on its standard input; must succeed. Its standard output.
async fn admin_with_stdin(app: &TestApp, args: &[&str], stdin: &str) -> String {
    let mut child = broker_for(app)
        .arg("admin")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).await.unwrap();
    let output = child.wait_with_output().await.unwrap();
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `admin ARGS` that must fail: its standard error.
async fn admin_refused(app: &TestApp, args: &[&str]) -> String {
    let output = broker_for(app).arg("admin").args(args).output().await.unwrap();
    assert!(!output.status.success(), "{args:?} should fail: {}", String::from_utf8_lossy(&output.stdout));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A client registered with the demo provider: (client id, secret).
async fn demo_client(app: &TestApp, name: &str) -> (String, String) {
    let shown: Value =
        serde_json::from_str(&admin_elsewhere(app, &["demo", "add-client", name, "--json"]).await).unwrap();
    (shown["client_id"].as_str().unwrap().to_owned(), shown["client_secret"].as_str().unwrap().to_owned())
}

/// Gives `org` the demo client `(id, secret)` as its app at the demo provider; its version.
async fn set_demo_app(app: &TestApp, org: &str, (id, secret): &(String, String)) -> Value {
    let args = ["orgs", "apps", "set", org, "demo", "--client-id", id, "--client-secret-stdin", "--json"];
    serde_json::from_str(&admin_with_stdin(app, &args, &format!("{secret}\n")).await).unwrap()
}

/// Moves `user` from the default organization into `org`.
async fn move_into(app: &TestApp, org: &str, user: &str) {
    admin_elsewhere(app, &["orgs", "join", org, user]).await;
    admin_elsewhere(app, &["orgs", "leave", "default", user]).await;
}

async fn tokens(app: &TestApp, service: &ServiceCredentials, user_id: &str) -> (StatusCode, Value) {
    let response = app
        .http()
        .post(app.url("/v1/tokens"))
        .basic_auth(&service.client_id, Some(&service.secret))
        .json(&json!({"user_id": user_id, "provider": "demo"}))
        .send()
        .await
        .unwrap();
    (response.status(), response.json().await.unwrap())
}

/// The fewest database reads one warm `/v1/proxy` call as `user` costs, over a few calls (a
/// background read of this process may land inside one).
async fn fewest_reads(app: &TestApp, service: &ServiceCredentials, user: &str) -> u64 {
    let mut fewest = u64::MAX;
    for _ in 0..5 {
        let before = app.state.core.store.queries_run();
        let answer = app
            .http()
            .get(app.url("/v1/proxy/demo/me"))
            .basic_auth(&service.client_id, Some(&service.secret))
            .header("x-user-id", user)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        fewest = fewest.min(app.state.core.store.queries_run() - before);
    }
    fewest
}

/// The client id the demo provider issued `account`'s newest token to.
async fn demo_client_of(app: &TestApp, account: &str) -> String {
    let (client,): (String,) = sqlx::query_as(
        "SELECT client_id FROM demo_tokens WHERE account = $1 ORDER BY expires_at DESC, token_hash LIMIT 1",
    )
    .bind(account)
    .fetch_one(app.state.core.store.pool())
    .await
    .unwrap();
    client
}

/// The organization and app a user's demo grant was made in and with.
async fn grant_origin(app: &TestApp, user_id: &str) -> (String, Option<String>) {
    sqlx::query_as("SELECT organization_id, app_id FROM grants WHERE user_id = $1 AND provider = 'demo'")
        .bind(user_id)
        .fetch_one(app.state.core.store.pool())
        .await
        .unwrap()
}

/// Connects through the consent page: checks it names `org_name` and `client_id`, and that
/// Approve goes to the demo provider with `client_id`; finishes as `account` there.
async fn connect(app: &TestApp, url: &str, user: &str, org_name: &str, client_id: &str, account: &str) {
    let browser = app.browser();
    app.sign_in(&browser, user, url.strip_prefix(&app.address).unwrap()).await;
    let page = browser.get(url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains(org_name), "the consent page names the organization {org_name}");
    assert!(html.contains(client_id), "and the client its app is at the provider");
    let csrf = hidden_field(&html, "csrf_token").unwrap();
    let approved =
        browser.post(url).form(&[("csrf_token", csrf.as_str()), ("action", "approve")]).send().await.unwrap();
    assert_eq!(approved.status(), 303);
    let at_provider = url::Url::parse(&location(&approved)).unwrap();
    let sent: Vec<_> =
        at_provider.query_pairs().filter(|(k, _)| k == "client_id").map(|(_, v)| v.into_owned()).collect();
    assert_eq!(sent, [client_id], "the authorization request carries the organization's client");
    let landed = app.approve_at_demo_provider(&browser, at_provider.as_str(), account).await;
    assert_eq!(landed.status(), 200, "connected");
}

async fn each_organization_connects_through_its_own_app(app: &TestApp) {
    let store = &app.state.core.store;
    admin_elsewhere(app, &["orgs", "add", "acme", "--name", "Acme Corp"]).await;
    admin_elsewhere(app, &["orgs", "add", "globex", "--name", "Globex Inc"]).await;
    move_into(app, "acme", ALICE).await;
    move_into(app, "globex", BOB).await;
    let acme_client = demo_client(app, "Acme notes").await;
    let globex_client = demo_client(app, "Globex notes").await;
    let acme_v1 = set_demo_app(app, "acme", &acme_client).await;
    assert_eq!(acme_v1["version"], 1);
    assert_eq!(acme_v1["redirect_uri"], app.url("/oauth/callback/demo"), "the URI to register at the provider");
    assert_eq!(acme_v1["public_client"], false);
    assert!(!acme_v1.to_string().contains(&acme_client.1), "the secret is never shown back");
    set_demo_app(app, "globex", &globex_client).await;
    let operator = crate::helpers::admin::admin_browser(app).await;
    let page = operator.get(app.url("/admin/orgs/acme")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains(&acme_client.0) && page.contains(&app.url("/oauth/callback/demo")), "{page}");
    assert!(!page.contains(&globex_client.0) && !page.contains(&acme_client.1), "{page}");
    let listed = admin_elsewhere(app, &["orgs", "apps", "list", "acme"]).await;
    assert!(listed.contains(&acme_client.0) && listed.contains("/oauth/callback/demo"), "{listed}");
    assert!(!listed.contains(&acme_client.1) && !listed.contains(&globex_client.0), "{listed}");

    let acme =
        store.organizations().by_slug(&oauth_broker::domain::OrgSlug::parse("acme").unwrap()).await.unwrap().unwrap();
    let globex =
        store.organizations().by_slug(&oauth_broker::domain::OrgSlug::parse("globex").unwrap()).await.unwrap().unwrap();
    let trusted = |org| ServiceOptions { trusted: true, org: Some(org), ..Default::default() };
    let acme_back = register_service(app, "acme-back", &["demo"], trusted(&acme.id)).await;
    let globex_back = register_service(app, "globex-back", &["demo"], trusted(&globex.id)).await;
    let (alice, bob) = (app.user_id(ALICE).await, app.user_id(BOB).await);

    // Each connects in their organization, through its app; each grant remembers it.
    for (service, user, name, org_name, client, account) in [
        (&acme_back, &alice, ALICE, "Acme Corp", &acme_client.0, "alice-at-acme"),
        (&globex_back, &bob, BOB, "Globex Inc", &globex_client.0, "bob-at-globex"),
    ] {
        let (status, problem) = tokens(app, service, user).await;
        assert_eq!(status, StatusCode::CONFLICT, "{problem}");
        connect(app, problem["authorization"]["url"].as_str().unwrap(), name, org_name, client, account).await;
        let (status, body) = tokens(app, service, user).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(
            &demo_client_of(app, account).await,
            client,
            "the provider issued the tokens to the organization's client"
        );
    }
    let (org, app_id) = grant_origin(app, &alice).await;
    assert_eq!((org.as_str(), app_id.as_deref()), (acme.id.as_str(), acme_v1["id"].as_str()));

    // A warm call through the organization's app reads no more than one through the operator's:
    // the app is built once per version and kept.
    let operator_back =
        register_service(app, "default-back", &["demo"], ServiceOptions { trusted: true, ..Default::default() }).await;
    admin_with_stdin(app, &["users", "add", "dora", "--password-stdin"], &format!("{PASSWORD}\n")).await;
    let dora = app.user_id("dora").await;
    let (_, problem) = tokens(app, &operator_back, &dora).await;
    let url = problem["authorization"]["url"].as_str().unwrap();
    app.approve_in_browser_as(&app.browser(), url, "dora", "dora-at-default").await;
    let through_operators = fewest_reads(app, &operator_back, &dora).await;
    let through_acmes = fewest_reads(app, &acme_back, &alice).await;
    assert_eq!(through_acmes, through_operators, "reads per warm /v1/proxy call");

    // A new version (another client) applies to new connections; Alice's grant keeps refreshing
    // with the client that issued it: the demo provider refuses a refresh token to any other.
    let acme_client_2 = demo_client(app, "Acme notes, new app").await;
    let acme_v2 = set_demo_app(app, "acme", &acme_client_2).await;
    assert_eq!(acme_v2["version"], 2);
    let history = admin_elsewhere(app, &["orgs", "apps", "history", "acme", "demo"]).await;
    assert!(
        history.contains(&acme_client.0) && history.contains(&acme_client_2.0) && history.contains("in use"),
        "{history}"
    );
    app.clock.advance(2 * 3600);
    let (status, body) = tokens(app, &acme_back, &alice).await;
    assert_eq!(status, StatusCode::OK, "refreshed with the grant's own app: {body}");
    assert_eq!(demo_client_of(app, "alice-at-acme").await, acme_client.0, "refreshed by the first client");
    assert_eq!(grant_origin(app, &alice).await.1.as_deref(), acme_v1["id"].as_str());

    // Alice joins globex too: globex's service does not see the connection made in acme (it
    // asks her to connect in globex, not to share acme's).
    admin_elsewhere(app, &["orgs", "join", "globex", ALICE]).await;
    let (status, problem) = tokens(app, &globex_back, &alice).await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    assert_eq!(problem["reason"], "not_connected", "{problem}");
    connect(
        app,
        problem["authorization"]["url"].as_str().unwrap(),
        ALICE,
        "Globex Inc",
        &globex_client.0,
        "alice-at-globex",
    )
    .await;

    // Removing acme's app: new connections in acme use the operator's app (shared by default).
    admin_elsewhere(app, &["orgs", "apps", "remove", "acme", "demo"]).await;
    assert!(admin_elsewhere(app, &["orgs", "apps", "list", "acme"]).await.contains("no app of its own"));
    let audit: Vec<(String,)> = sqlx::query_as("SELECT action FROM audit_log WHERE action LIKE 'org.app%' ORDER BY id")
        .fetch_all(store.pool())
        .await
        .unwrap();
    let actions: Vec<_> = audit.into_iter().map(|(a,)| a).collect();
    assert_eq!(actions, ["org.app_set", "org.app_set", "org.app_set", "org.app_removed"]);
}

on_both_backends!(own_apps, each_organization_connects_through_its_own_app);

async fn bad_app_settings_are_refused_with_nothing_stored(app: &TestApp) {
    admin_elsewhere(app, &["orgs", "add", "acme"]).await;
    let refused = [
        (vec!["orgs", "apps", "set", "acme", "nope", "--client-id", "x", "--public"], "no provider nope"),
        (vec!["orgs", "apps", "set", "nobody", "demo", "--client-id", "x", "--public"], "no organization nobody"),
        (vec!["orgs", "apps", "set", "acme", "demo", "--client-id", "x"], "--client-secret-stdin"),
        (vec!["orgs", "apps", "set", "acme", "demo", "--client-id", " ", "--public"], "client_id"),
        (
            vec!["orgs", "apps", "set", "acme", "demo", "--client-id", "x", "--public", "--template", "tenant=t"],
            "no template values",
        ),
        (
            vec!["orgs", "apps", "set", "acme", "demo", "--client-id", "x", "--public", "--template", "oops"],
            "NAME=VALUE",
        ),
        (
            vec!["orgs", "apps", "set", "acme", "demo", "--client-id", "x", "--public", "--scopes", "admin:all"],
            "scopes",
        ),
        (vec!["orgs", "apps", "remove", "acme", "demo"], "no app of its own"),
    ];
    for (args, why) in refused {
        let stderr = admin_refused(app, &args).await;
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    }
    let (n,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM provider_apps").fetch_one(app.state.core.store.pool()).await.unwrap();
    assert_eq!(n, 0, "nothing stored");
}

on_both_backends!(bad_settings, bad_app_settings_are_refused_with_nothing_stored);

/// A provider the operator keeps to the default organization (`shared_with_organizations =
/// false`): an organization without its own app is told so on the consent page, before any
/// trip to the provider; with its own app it goes there with its client.
async fn an_unshared_provider_needs_the_organizations_own_app(backend: Backend) {
    let provider = StrictProvider::start(std::time::Duration::from_secs(3600)).await;
    let toml = format!("{}shared_with_organizations = false\n", provider.toml());
    let Some(app) = app_with(backend, &toml).await else { return };
    admin_elsewhere(&app, &["orgs", "add", "acme", "--name", "Acme Corp"]).await;
    move_into(&app, "acme", ALICE).await;
    let acme = app
        .state
        .core
        .store
        .organizations()
        .by_slug(&oauth_broker::domain::OrgSlug::parse("acme").unwrap())
        .await
        .unwrap()
        .unwrap();
    let service = register_service(
        &app,
        "acme-back",
        &["strict"],
        ServiceOptions { trusted: true, org: Some(&acme.id), ..Default::default() },
    )
    .await;
    let ask = || async {
        let response = app
            .http()
            .post(app.url("/v1/tokens"))
            .basic_auth(&service.client_id, Some(&service.secret))
            .json(&json!({"user_id": app.user_id(ALICE).await, "provider": "strict"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        let problem: Value = response.json().await.unwrap();
        problem["authorization"]["url"].as_str().unwrap().to_owned()
    };
    let url = ask().await;
    let browser = app.browser();
    app.sign_in(&browser, ALICE, url.strip_prefix(&app.address).unwrap()).await;
    let page = browser.get(&url).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::CONFLICT);
    let text = page.text().await.unwrap();
    assert!(text.contains("has not set up its own app"), "{text}");
    // Approving anyway (a form kept from before) is refused the same, with nothing sent.
    let approved = browser
        .post(&url)
        .form(&[("csrf_token", session_csrf(&app, &browser).await.as_str()), ("action", "approve")])
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), StatusCode::CONFLICT);

    // The operator's CLI reads the same settings file as the server.
    let config = app.data_dir().join("providers.toml");
    std::fs::write(&config, &toml).unwrap();
    let config = config.to_str().unwrap();
    let args = [
        "--config",
        config,
        "orgs",
        "apps",
        "set",
        "acme",
        "strict",
        "--client-id",
        "acme-broker",
        "--client-secret-stdin",
    ];
    admin_with_stdin(&app, &args, "s3cret\n").await;
    let page = browser.get(&url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("Acme Corp") && html.contains("acme-broker"));
    let csrf = hidden_field(&html, "csrf_token").unwrap();
    let approved =
        browser.post(&url).form(&[("csrf_token", csrf.as_str()), ("action", "approve")]).send().await.unwrap();
    assert_eq!(approved.status(), 303);
    let at_provider = url::Url::parse(&location(&approved)).unwrap();
    assert!(at_provider.as_str().starts_with(&provider.url));
    assert!(at_provider.query_pairs().any(|(k, v)| k == "client_id" && v == "acme-broker"), "{at_provider}");

    // The default organization keeps the operator's app.
    let bob_service =
        register_service(&app, "default-back", &["strict"], ServiceOptions { trusted: true, ..Default::default() })
            .await;
    let response = app
        .http()
        .post(app.url("/v1/tokens"))
        .basic_auth(&bob_service.client_id, Some(&bob_service.secret))
        .json(&json!({"user_id": app.user_id(BOB).await, "provider": "strict"}))
        .send()
        .await
        .unwrap();
    let problem: Value = response.json().await.unwrap();
    let bob_url = problem["authorization"]["url"].as_str().unwrap().to_owned();
    let bob_browser = app.browser();
    app.sign_in(&bob_browser, BOB, bob_url.strip_prefix(&app.address).unwrap()).await;
    let html = bob_browser.get(&bob_url).send().await.unwrap().text().await.unwrap();
    assert!(html.contains("Default organization") && html.contains("the broker's app"), "{html}");
    app.stop().await;
}

/// The CSRF token of `browser`'s session, read off a page that carries it.
async fn session_csrf(app: &TestApp, browser: &reqwest::Client) -> String {
    let html = browser.get(app.url("/connections")).send().await.unwrap().text().await.unwrap();
    hidden_field(&html, "csrf_token").expect("a signed-in page carries the session's CSRF token")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unshared_provider_needs_the_organizations_own_app_sqlite() {
    an_unshared_provider_needs_the_organizations_own_app(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unshared_provider_needs_the_organizations_own_app_postgres() {
    an_unshared_provider_needs_the_organizations_own_app(Backend::Postgres).await;
}

/// The README's "Two organizations, each with its own app", command for command: two
/// organizations, a demo-provider client each, set as their apps, a user in each with a token;
/// each user's MCP client connects, each consent page names its organization and its client,
/// and the demo provider issues each user's tokens to their organization's client.
async fn the_readmes_two_organizations(app: &TestApp) {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    for command in [
        "cargo run -- admin orgs add acme --name \"Acme Corp\"",
        "cargo run -- admin demo add-client \"Acme notes\"",
        "cargo run -- admin orgs apps set acme demo --client-id <acme client_id> --client-secret-stdin",
        "cargo run -- admin users add ann --org acme",
        "cargo run -- admin tokens issue ann --client demo_client --ttl 24h",
    ] {
        assert!(readme.contains(command), "the README still says {command}");
    }
    let field = |text: &str, name: &str| -> String {
        let line = text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name} in {text}"));
        line[name.len()..].split_whitespace().next().unwrap().to_owned()
    };
    let mut people = Vec::new();
    for (org, name, client_name, user) in
        [("acme", "Acme Corp", "Acme notes", "ann"), ("globex", "Globex Inc", "Globex notes", "gus")]
    {
        admin_elsewhere(app, &["orgs", "add", org, "--name", name]).await;
        let shown = admin_elsewhere(app, &["demo", "add-client", client_name]).await;
        let (client_id, secret) = (field(&shown, "client_id:"), field(&shown, "client_secret:"));
        let set = admin_with_stdin(
            app,
            &["orgs", "apps", "set", org, "demo", "--client-id", &client_id, "--client-secret-stdin"],
            &secret,
        )
        .await;
        assert!(set.contains(&app.url("/oauth/callback/demo")), "says the redirect URI to register: {set}");
        let created = admin_elsewhere(app, &["users", "add", user, "--org", org]).await;
        let password = field(&created, "password:");
        let token = admin_elsewhere(app, &["tokens", "issue", user, "--client", "demo_client", "--ttl", "24h"]).await;
        people.push((user, name, client_id, password, token.trim().to_owned()));
    }
    assert!(admin_elsewhere(app, &["demo", "clients"]).await.contains("Globex notes"));
    for (user, org_name, client_id, password, token) in &people {
        let client = app.mcp_client_with_token(token, ClientKind::Url).await.unwrap();
        let error =
            match client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await {
                Err(rmcp::ServiceError::McpError(e)) => e,
                other => panic!("expected -32042, got {other:?}"),
            };
        let url = error.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();
        let browser = app.browser();
        let login = browser.get(app.url("/login")).send().await.unwrap().text().await.unwrap();
        let csrf = hidden_field(&login, "csrf_token").unwrap();
        let next = url.strip_prefix(&app.address).unwrap();
        let signed_in = browser
            .post(app.url("/login"))
            .form(&[("username", *user), ("password", password.as_str()), ("next", next), ("csrf_token", &csrf)])
            .send()
            .await
            .unwrap();
        assert_eq!(signed_in.status(), 303, "{user} signs in with the printed password");
        let html = browser.get(&url).send().await.unwrap().text().await.unwrap();
        assert!(html.contains(org_name) && html.contains(client_id.as_str()), "{user}'s consent page");
        let csrf = hidden_field(&html, "csrf_token").unwrap();
        let approved =
            browser.post(&url).form(&[("csrf_token", csrf.as_str()), ("action", "approve")]).send().await.unwrap();
        let at_provider = location(&approved);
        let page = browser.get(&at_provider).send().await.unwrap().text().await.unwrap();
        let app_name = if *org_name == "Acme Corp" { "Acme notes" } else { "Globex notes" };
        assert!(page.contains(app_name), "the demo provider asks on behalf of {app_name}");
        let account = format!("{user}-demo");
        app.approve_at_demo_provider(&browser, &at_provider, &account).await;
        assert_eq!(&demo_client_of(app, &account).await, client_id, "{user}'s tokens went to {org_name}'s client");
        let answer =
            client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await.unwrap();
        assert!(format!("{answer:?}").contains(&account), "{answer:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_two_organizations_sqlite() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    the_readmes_two_organizations(&app).await;
    app.stop().await;
}
