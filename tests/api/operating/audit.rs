//! The audit log (issue 10): every security event says who acted, about whom, how it ended and
//! when, and never holds a secret; entries written before migration 0009 get an actor too.

use serde_json::json;

use crate::helpers::{ALICE, Backend, EmptyDatabase, TestApp, hidden_field};
use crate::on_both_backends;
use oauth_broker::store::Store;

/// (action, actor, outcome, detail) of every entry, oldest first.
async fn entries(app: &TestApp) -> Vec<(String, String, String, String)> {
    let mut all: Vec<_> = app
        .state
        .core
        .store
        .audit()
        .entries(None, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.action, e.actor.unwrap_or_default(), e.outcome.unwrap_or_default(), e.detail.unwrap_or_default()))
        .collect();
    all.reverse();
    all
}

fn find<'a>(all: &'a [(String, String, String, String)], action: &str) -> &'a (String, String, String, String) {
    all.iter().find(|e| e.0 == action).unwrap_or_else(|| panic!("no {action} in {all:#?}"))
}

// Issue 10: sign-in failure and success, the authorization, the grant, the consent, a refresh
// and the revocation each leave an entry with the right actor and outcome; none holds the
// password tried, the user's bearer token or a provider token.
async fn every_security_event_of_a_connect_flow_is_audited_with_its_actor_and_outcome_and_no_secret(app: &TestApp) {
    let alice = app.user_id(ALICE).await;
    let user = format!("user:{alice}");

    // A wrong password: refused, by a visitor (nobody is signed in yet), the password never kept.
    let browser = app.browser();
    let login = browser.get(app.url("/login")).send().await.unwrap().text().await.unwrap();
    let csrf = hidden_field(&login, "csrf_token").unwrap();
    let wrong = "not-the-password-0f1e2d";
    let form = [("username", ALICE), ("password", wrong), ("next", "/"), ("csrf_token", csrf.as_str())];
    assert_eq!(browser.post(app.url("/login")).form(&form).send().await.unwrap().status(), 401);

    let client = app.connected_client(ALICE).await;
    let bearer = app.token_for(ALICE).await;
    // The demo provider's access tokens live an hour: the next use refreshes first.
    app.clock.advance(2 * 3600);
    let me = client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    assert_eq!(me.unwrap().structured_content.unwrap()["status"], 200);
    let result = client.call("disconnect_account", json!({"provider": "demo"})).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    client.close().await;

    let all = entries(app).await;
    let failed = find(&all, "browser.sign_in_failed");
    assert_eq!((failed.1.as_str(), failed.2.as_str()), ("visitor", "refused"), "{failed:?}");
    assert!(failed.3.contains("username=\"alice\""), "{failed:?}");
    for action in ["browser.signed_in", "authorization.created", "grant.stored", "authorization.completed"] {
        let entry = find(&all, action);
        assert_eq!((entry.1.as_str(), entry.2.as_str()), (user.as_str(), "success"), "{entry:?}");
    }
    let consent = find(&all, "consent.granted");
    assert_eq!(consent.1, user, "{consent:?}");
    let refreshed = find(&all, "grant.refreshed");
    assert_eq!((refreshed.1.as_str(), refreshed.2.as_str()), ("broker", "success"), "{refreshed:?}");
    let disconnected = find(&all, "grant.disconnected");
    assert_eq!(disconnected.2, "success", "{disconnected:?}");
    assert!(disconnected.3.contains("revocation=revoked"), "the provider's answer is recorded: {disconnected:?}");

    let text = format!("{all:?}");
    assert!(!text.contains(wrong), "the password tried is never audited");
    assert!(!text.contains(&bearer), "nor a bearer token");
    assert!(!text.to_lowercase().contains("bearer "), "{text}");
}
on_both_backends!(
    audit_of_a_connect_flow,
    every_security_event_of_a_connect_flow_is_audited_with_its_actor_and_outcome_and_no_secret
);

// Issue 10: entries written before 0009 had no actor column; the admin pages wrote the admin
// into `detail`. The migration names the actor of each by the same rules as the code, leaves
// `detail` as written, and a username a visitor typed cannot pose as an admin.
async fn migration_0009_names_the_actor_of_entries_written_before_it(backend: Backend) {
    let Some(db) = EmptyDatabase::create(backend).await else { return };
    let store = Store::connect(&db.url).await.unwrap();
    let folder = if backend == Backend::Sqlite { "sqlite" } else { "postgres" };
    let before = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(format!("{}/migrations/{folder}", env!("CARGO_MANIFEST_DIR"))).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if name.as_str() < "0009" {
            std::fs::copy(&path, before.path().join(name)).unwrap();
        }
    }
    sqlx::migrate::Migrator::new(before.path()).await.unwrap().run(store.pool()).await.unwrap();
    let rows: &[(&str, Option<&str>, Option<&str>)] = &[
        ("admin.grant_revoked", Some("u-alice"), Some("actor=u-bob (bob) grant=g1 revocation=revoked")),
        ("admin.user_disabled", Some("u-alice"), Some("actor=cli sessions_ended=1")),
        ("admin.user_admin_set", Some("u-alice"), Some("admin=true actor=cli")),
        (
            "browser.sign_in_failed",
            Some("u-alice"),
            Some("username=\"x actor=u-evil\" address=1.2.3.4 reason=password"),
        ),
        ("browser.signed_in", Some("u-alice"), None),
        ("grant.refreshed", Some("u-alice"), None),
        ("authorization.declined", Some("u-alice"), None),
        ("grant.needs_reconsent", Some("u-alice"), Some("invalid_grant")),
        ("user.admin_from_claim", Some("u-alice"), Some("admin=true actor=issuer claim=groups")),
        ("service.added", None, Some("service=s1")),
        ("oauth_client.registered", None, Some("c1")),
    ];
    for (i, (action, user, detail)) in rows.iter().enumerate() {
        sqlx::query("INSERT INTO audit_log (at, user_id, action, provider, detail) VALUES ($1, $2, $3, NULL, $4)")
            .bind(i as i64 + 1)
            .bind(*user)
            .bind(*action)
            .bind(*detail)
            .execute(store.pool())
            .await
            .unwrap();
    }
    store.migrate().await.unwrap();
    let mut got = store.audit().entries(None, 100).await.unwrap();
    got.reverse();
    let said: Vec<(&str, &str, &str)> = got
        .iter()
        .map(|e| (e.action.as_str(), e.actor.as_deref().unwrap_or("NULL"), e.outcome.as_deref().unwrap_or("NULL")))
        .collect();
    assert_eq!(
        said,
        vec![
            ("admin.grant_revoked", "admin:u-bob", "success"),
            ("admin.user_disabled", "cli", "success"),
            ("admin.user_admin_set", "cli", "success"),
            ("browser.sign_in_failed", "visitor", "refused"),
            ("browser.signed_in", "user:u-alice", "success"),
            ("grant.refreshed", "broker", "success"),
            ("authorization.declined", "user:u-alice", "refused"),
            ("grant.needs_reconsent", "broker", "failure"),
            ("user.admin_from_claim", "issuer", "success"),
            ("service.added", "cli", "success"),
            ("oauth_client.registered", "broker", "success"),
        ]
    );
    assert_eq!(got[0].detail.as_deref(), Some("actor=u-bob (bob) grant=g1 revocation=revoked"), "detail as written");
    // The code's rules for callers that name no actor agree with the backfill, row by row.
    for (e, (action, user, detail)) in got.iter().zip(rows) {
        let implied = oauth_broker::store::audit::implied_actor(action, *user, *detail).as_text();
        assert_eq!(Some(implied.as_str()), e.actor.as_deref(), "{action}");
        let outcome = oauth_broker::store::audit::Outcome::of_action(action).as_str();
        assert_eq!(Some(outcome), e.outcome.as_deref(), "{action}");
    }
    store.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn migration_0009_names_the_actor_of_entries_written_before_it_on_sqlite() {
    migration_0009_names_the_actor_of_entries_written_before_it(Backend::Sqlite).await;
}

#[tokio::test]
async fn migration_0009_names_the_actor_of_entries_written_before_it_on_postgres() {
    migration_0009_names_the_actor_of_entries_written_before_it(Backend::Postgres).await;
}
