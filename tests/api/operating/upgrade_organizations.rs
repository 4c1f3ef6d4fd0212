//! Upgrading from the build before organizations: a database that build made (one customer,
//! migration 0038 the last; `tests/fixtures/upgrade-organizations/`, made by that build itself)
//! is migrated by this binary and becomes the default organization, with nothing lost and
//! nothing for the operator to do:
//! - `migrate --status` names migration 0039 pending, `migrate` applies it;
//! - every user is a member of the default organization, the admin as its admin; the service
//!   `notes` is the default organization's;
//! - alice's grant and her consents go on: her MCP client's call and the service's token
//!   request are answered without asking her again;
//! - a service of a new organization cannot act for her.

use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::helpers::token_api::{ServiceOptions, register_service, user_token_for};
use crate::helpers::upgrade::Fixture;
use crate::helpers::*;

async fn upgrade_from_the_build_before_organizations(backend: Backend) {
    let fixture = Fixture::load("upgrade-organizations", backend);
    let Some(db) = fixture.restore(backend).await else { return };
    let public_url = fixture.text("public_url");

    let status = fixture.operator(&db.url, &["migrate", "--status"]);
    assert!(status.contains("38  applied") && status.contains("39  pending  organizations"), "{status}");
    fixture.operator(&db.url, &["migrate"]);
    let status = fixture.operator(&db.url, &["migrate", "--status"]);
    assert!(status.contains(" 0 pending"), "nothing left pending: {status}");

    // Everything is the default organization's.
    let orgs: Value = serde_json::from_str(&fixture.operator(&db.url, &["admin", "orgs", "list", "--json"])).unwrap();
    assert_eq!(orgs.as_array().unwrap().len(), 1, "{orgs}");
    assert_eq!((orgs[0]["slug"].as_str(), orgs[0]["id"].as_str()), (Some("default"), Some("org_default")));
    let members: Value =
        serde_json::from_str(&fixture.operator(&db.url, &["admin", "orgs", "members", "default", "--json"])).unwrap();
    let mut roles: Vec<_> = members
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["user_id"].as_str().unwrap().to_owned(), m["role"].as_str().unwrap().to_owned()))
        .collect();
    roles.sort();
    let mut expected =
        vec![(fixture.text("alice_id"), "admin".to_owned()), (fixture.text("bob_id"), "member".to_owned())];
    expected.sort();
    assert_eq!(roles, expected, "every user, the admin as the organization's admin");
    let services: Value =
        serde_json::from_str(&fixture.operator(&db.url, &["admin", "services", "list", "--json"])).unwrap();
    assert_eq!((services[0]["name"].as_str(), services[0]["org"].as_str()), (Some("notes"), Some("default")));

    // This build starts on the upgraded database, with the old key and public URL.
    let app = spawn_app_opts(
        backend,
        SpawnOptions {
            instance_of: Some(Instance {
                database_url: db.url.clone(),
                encryption_key: SecretString::from(fixture.text("encryption_key")),
                public_url: public_url.clone(),
            }),
            clock_at: Some(fixture.facts["now"].as_i64().unwrap() + 60),
            listen: Some(public_url.strip_prefix("http://").unwrap().parse().unwrap()),
            ..Default::default()
        },
        |builder| builder,
    )
    .await
    .unwrap();
    assert_eq!(app.user_id(ALICE).await, fixture.text("alice_id"), "the same users");

    // Alice's MCP client: her grant and her consent are still there.
    let alice = app.mcp_client(ALICE, ClientKind::Url).await;
    let me = json!({"provider": "demo", "method": "GET", "path": "/me"});
    let answered = alice.call("provider_request", me).await.expect("no new consent for alice");
    assert_ne!(answered.is_error, Some(true), "{answered:?}");
    alice.close().await;

    // The service notes, in the default organization, still gets her token without asking.
    let resource = fixture.text("service_resource");
    let token = user_token_for(&app, ALICE, &resource).await;
    let ask = |client_id: String, secret: String, token: String| {
        app.http()
            .post(app.url("/v1/tokens"))
            .basic_auth(client_id, Some(secret))
            .json(&json!({"subject_token": token, "provider": "demo"}))
            .send()
    };
    let got = ask("svc_notes".into(), fixture.text("service_secret"), token).await.unwrap();
    assert_eq!(got.status(), StatusCode::OK, "{}", got.text().await.unwrap());

    // A service of a new organization is refused her, as for a token not meant for it.
    let acme = app
        .state
        .core
        .store
        .organizations()
        .create(&oauth_broker::domain::OrgSlug::parse("acme").unwrap(), "Acme", app.now())
        .await
        .unwrap();
    let outsider = register_service(
        &app,
        "acme-notes",
        &["demo"],
        ServiceOptions { resource: Some("https://acme.example/mcp"), org: Some(&acme.id), ..Default::default() },
    )
    .await;
    let token = user_token_for(&app, ALICE, "https://acme.example/mcp").await;
    let refused = ask(outsider.client_id, outsider.secret, token).await.unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    app.stop().await;
    db.drop_now().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sqlite_database_of_the_build_before_organizations_upgrades_into_the_default_one() {
    upgrade_from_the_build_before_organizations(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_of_the_build_before_organizations_upgrades_into_the_default_one() {
    upgrade_from_the_build_before_organizations(Backend::Postgres).await;
}

/// On PostgreSQL a migration that rewrites a large table takes longer than one request's
/// database deadline (`database_timeout`, which every pooled connection carries as
/// `statement_timeout`): `migrate` runs the migrations without it. Here 100,000 users make 0039's
/// copy into `memberships` take several times the shortest deadline allowed (100 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_migration_longer_than_the_request_deadline_runs_to_its_end() {
    let fixture = Fixture::load("upgrade-organizations", Backend::Postgres);
    let Some(db) = fixture.restore(Backend::Postgres).await else { return };
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    sqlx::query(
        "INSERT INTO users (id, issuer, subject, username, password_hash, created_at) \
         SELECT md5(i::text)::uuid::text, 'http://issuer', md5(i::text)::uuid::text, 'bulk' || i, 'x', 1700000000 + i \
         FROM generate_series(1, 100000) i",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("broker.toml");
    std::fs::write(&config, "database_timeout = \"100ms\"\n").unwrap();
    let config = config.to_str().unwrap();
    fixture.operator(&db.url, &["--config", config, "migrate"]);
    let shown = fixture.operator(&db.url, &["--config", config, "admin", "orgs", "show", "default"]);
    assert!(shown.contains("members:  more than 10,000"), "every user is in the default organization: {shown}");
    db.drop_now().await;
}
