//! Organizations and who belongs to them, through the store and as an operator runs the CLI
//! (`oauth-broker admin orgs …`, its own process against the app's database), on both backends.

use oauth_broker::domain::{OrgRole, OrgSlug, OrganizationId};
use oauth_broker::store::StoreError;
use oauth_broker::store::organizations::Joined;
use oauth_broker::store::paging::{Search, Window};
use serde_json::Value;

use crate::helpers::cli::{admin_elsewhere, broker_for};
use crate::helpers::*;
use crate::on_both_backends;

/// `admin ARGS` that must fail: its standard error.
async fn admin_refused(app: &TestApp, args: &[&str]) -> String {
    let output = broker_for(app).arg("admin").args(args).output().await.unwrap();
    assert!(!output.status.success(), "{args:?} should fail: {}", String::from_utf8_lossy(&output.stdout));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn slug(text: &str) -> OrgSlug {
    OrgSlug::parse(text).unwrap()
}

async fn everyone_starts_in_the_default_organization_and_joins_others(app: &TestApp) {
    let store = &app.state.core.store;
    let default = store.organizations().default_organization().await.unwrap();
    assert_eq!((default.id.as_str(), default.slug.as_str()), ("org_default", "default"));
    let alice = app.user_id(ALICE).await;
    let bob = app.user_id(BOB).await;
    for user in [&alice, &bob] {
        assert_eq!(store.in_org(&default.id).members().role_of(user).await.unwrap(), Some(OrgRole::Member));
    }

    let acme = store.organizations().create(&slug("acme"), "Acme Corp", app.now()).await.unwrap();
    assert!(acme.id.as_str().starts_with("org_") && !acme.id.is_default());
    assert!(matches!(
        store.organizations().create(&slug("acme"), "Another", app.now()).await,
        Err(StoreError::Conflict)
    ));
    let members = store.in_org(&acme.id).members();
    assert_eq!(members.role_of(&alice).await.unwrap(), None, "nobody is in a new organization");
    assert_eq!(members.add(&alice, OrgRole::Admin, app.now()).await.unwrap(), Joined::Added);
    assert_eq!(members.add(&alice, OrgRole::Member, app.now()).await.unwrap(), Joined::Already(OrgRole::Admin));
    assert_eq!(members.add("no-such-user", OrgRole::Member, app.now()).await.unwrap(), Joined::NoSuchUser);
    assert_eq!(members.role_of(&alice).await.unwrap(), Some(OrgRole::Admin));
    assert_eq!(
        store.in_org(&default.id).members().role_of(&alice).await.unwrap(),
        Some(OrgRole::Member),
        "a role is per organization"
    );
    let mine: Vec<_> = store
        .organizations()
        .of_user(&alice)
        .await
        .unwrap()
        .into_iter()
        .map(|(org, role)| (org.slug.to_string(), role))
        .collect();
    assert_eq!(mine, [("acme".to_owned(), OrgRole::Admin), ("default".to_owned(), OrgRole::Member)]);

    // A changed role and a removal are seen at once (the cached role goes with them).
    assert!(members.set_role(&alice, OrgRole::Member).await.unwrap());
    assert_eq!(members.role_of(&alice).await.unwrap(), Some(OrgRole::Member));
    assert!(members.remove(&alice, app.now()).await.unwrap());
    assert_eq!(members.role_of(&alice).await.unwrap(), None);
    assert!(!members.remove(&alice, app.now()).await.unwrap());
    assert!(!members.set_role(&bob, OrgRole::Admin).await.unwrap(), "bob was never a member");
    assert_eq!(store.in_org(&default.id).members().role_of(&alice).await.unwrap(), Some(OrgRole::Member));

    // An id that names no organization holds nobody.
    let ghost = OrganizationId::generate();
    assert_eq!(store.in_org(&ghost).members().role_of(&alice).await.unwrap(), None);
}
on_both_backends!(default_organization, everyone_starts_in_the_default_organization_and_joins_others);

async fn members_and_organizations_page_without_gaps_or_repeats(app: &TestApp) {
    let store = &app.state.core.store;
    let big = store.organizations().create(&slug("big"), "Big", app.now()).await.unwrap();
    let issuer = app.state.core.config.issuer();
    let mut expected = Vec::new();
    for n in 0..7 {
        // Two members joined in the same second: the page's order is (joined, id).
        let user = store
            .users()
            .create_local_in(&big.id, OrgRole::Member, &issuer, &format!("member{n}"), "x", app.now() + n / 2)
            .await
            .unwrap();
        expected.push(user.id);
    }
    let mut seen = Vec::new();
    let mut window = Window::first(3);
    loop {
        let page = store.in_org(&big.id).members().page(window).await.unwrap();
        assert!(page.rows.len() <= 3);
        seen.extend(page.rows.into_iter().map(|m| m.user.id));
        match page.next {
            Some(next) => window = Window::after(3, next),
            None => break,
        }
    }
    let mut sorted = expected.clone();
    sorted.sort_by_key(|id| {
        let n = expected.iter().position(|e| e == id).unwrap() as i64;
        (n / 2, id.clone())
    });
    assert_eq!(seen, sorted, "every member once, oldest first");
    assert_eq!(store.in_org(&big.id).members().count().await.unwrap().shown(), "7");
    // Users made in an organization are not in the default one.
    let default = OrganizationId::default_organization();
    assert_eq!(store.in_org(&default).members().role_of(&expected[0]).await.unwrap(), None);

    for name in ["zeta", "alpha", "mid"] {
        store.organizations().create(&slug(name), &format!("{name} inc"), app.now()).await.unwrap();
    }
    let first = store.organizations().page(&Search::new(""), Window::first(2)).await.unwrap();
    let slugs: Vec<_> = first.rows.iter().map(|o| o.slug.to_string()).collect();
    assert_eq!(slugs, ["alpha", "big"]);
    let rest = store.organizations().page(&Search::new(""), Window::after(10, first.next.unwrap())).await.unwrap();
    let slugs: Vec<_> = rest.rows.iter().map(|o| o.slug.to_string()).collect();
    assert_eq!(slugs, ["default", "mid", "zeta"]);
    assert!(rest.next.is_none());
    let found = store.organizations().page(&Search::new("ZETA"), Window::first(10)).await.unwrap();
    assert_eq!(found.rows.len(), 1);
    assert_eq!(store.organizations().page(&Search::new("%"), Window::first(10)).await.unwrap().rows.len(), 0);
}
on_both_backends!(paging, members_and_organizations_page_without_gaps_or_repeats);

async fn an_operator_manages_organizations_from_the_command_line(app: &TestApp) {
    let added = admin_elsewhere(app, &["orgs", "add", "acme", "--name", "Acme Corp"]).await;
    assert!(added.starts_with("created organization acme (id org_"), "{added}");
    let listed = admin_elsewhere(app, &["orgs", "list"]).await;
    let lines: Vec<_> = listed.lines().collect();
    assert!(lines[0].starts_with("SLUG") && lines[0].contains("NAME"), "{listed}");
    assert!(lines[1].starts_with("acme ") && lines[1].contains("Acme Corp"), "{listed}");
    assert!(lines[2].starts_with("default ") && lines[2].contains("Default organization"), "{listed}");
    let json: Value =
        serde_json::from_str(&admin_elsewhere(app, &["orgs", "list", "--json", "--search", "acme"]).await).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 1);
    assert_eq!(json[0]["slug"], "acme");

    let joined = admin_elsewhere(app, &["orgs", "join", "acme", ALICE, "--role", "admin"]).await;
    assert_eq!(joined.trim(), "alice joined acme as admin");
    // By id as well as by username.
    let bob = app.user_id(BOB).await;
    admin_elsewhere(app, &["orgs", "join", "acme", &bob]).await;
    let again = admin_elsewhere(app, &["orgs", "join", "acme", ALICE]).await;
    assert!(again.contains("already a member of acme (role admin"), "{again}");
    let members: Value =
        serde_json::from_str(&admin_elsewhere(app, &["orgs", "members", "acme", "--json"]).await).unwrap();
    let mut roles: Vec<_> =
        members.as_array().unwrap().iter().map(|m| (m["username"].clone(), m["role"].clone())).collect();
    // Both joined in the same second of the test's clock: then the order is the user id's.
    roles.sort_by_key(|(name, _)| name.to_string());
    assert_eq!(roles, [(ALICE.into(), "admin".into()), (BOB.into(), "member".into())]);
    let shown = admin_elsewhere(app, &["orgs", "show", "acme"]).await;
    assert!(shown.contains("name:     Acme Corp") && shown.contains("members:  2"), "{shown}");

    admin_elsewhere(app, &["orgs", "set-role", "acme", BOB, "admin"]).await;
    admin_elsewhere(app, &["orgs", "rename", "acme", "--name", "Acme Holdings"]).await;
    let left = admin_elsewhere(app, &["orgs", "leave", "acme", ALICE]).await;
    assert!(left.contains("alice is no longer a member of acme"), "{left}");
    let shown: Value = serde_json::from_str(&admin_elsewhere(app, &["orgs", "show", "acme", "--json"]).await).unwrap();
    assert_eq!((shown["name"].as_str(), shown["members"].as_str()), (Some("Acme Holdings"), Some("1")));

    // A user and a service made in the organization.
    let carol = admin_elsewhere(app, &["users", "add", "carol", "--org", "acme", "--role", "admin"]).await;
    assert!(carol.contains("admin of acme"), "{carol}");
    admin_elsewhere(app, &["services", "add", "acme-notes", "--providers", "demo", "--org", "acme"]).await;
    admin_elsewhere(app, &["services", "add", "house", "--providers", "demo"]).await;
    let services: Value = serde_json::from_str(&admin_elsewhere(app, &["services", "list", "--json"]).await).unwrap();
    let orgs: Vec<_> = services.as_array().unwrap().iter().map(|s| (s["name"].clone(), s["org"].clone())).collect();
    assert_eq!(orgs, [("acme-notes".into(), "acme".into()), ("house".into(), "default".into())]);
    let only: Value =
        serde_json::from_str(&admin_elsewhere(app, &["services", "list", "--org", "acme", "--json"]).await).unwrap();
    assert_eq!(only.as_array().unwrap().len(), 1);

    // Every change is in the audit log, naming the organization.
    let audit = admin_elsewhere(app, &["audit", "--limit", "100"]).await;
    for action in ["org.added", "org.member_added", "org.member_role_set", "org.renamed", "org.member_removed"] {
        assert!(audit.contains(action), "{action} audited: {audit}");
    }
    assert!(audit.contains("org=acme"), "{audit}");

    // Bad input: a clear error, nothing written.
    let before = admin_elsewhere(app, &["orgs", "list", "--json"]).await;
    let refused = admin_refused(app, &["orgs", "add", "Acme_Corp"]).await;
    assert!(refused.contains("an organization's slug is 1-64 characters"), "{refused}");
    let refused = admin_refused(app, &["orgs", "add", "acme"]).await;
    assert!(refused.contains("an organization acme already exists"), "{refused}");
    let refused = admin_refused(app, &["orgs", "add", "empty", "--name", " "]).await;
    assert!(refused.contains("an organization's name is 1-100 characters"), "{refused}");
    let refused = admin_refused(app, &["orgs", "join", "nope", ALICE]).await;
    assert!(refused.contains("no organization nope (see `oauth-broker admin orgs list`)"), "{refused}");
    let refused = admin_refused(app, &["orgs", "join", "acme", "nobody"]).await;
    assert!(refused.contains("no user nobody"), "{refused}");
    let refused = admin_refused(app, &["orgs", "join", "acme", ALICE, "--role", "owner"]).await;
    assert!(refused.contains("role must be \"member\" or \"admin\""), "{refused}");
    let refused = admin_refused(app, &["orgs", "leave", "acme", ALICE]).await;
    assert!(refused.contains("alice is not a member of acme"), "{refused}");
    let refused = admin_refused(app, &["users", "add", "dave", "--org", "nope"]).await;
    assert!(refused.contains("no organization nope"), "{refused}");
    assert!(app.state.core.store.users().by_username("dave").await.unwrap().is_none(), "no user made");
    let refused = admin_refused(app, &["services", "add", "lost", "--providers", "demo", "--org", "nope"]).await;
    assert!(refused.contains("no organization nope"), "{refused}");
    assert!(app.state.core.store.services().by_name("lost").await.unwrap().is_none(), "no service made");
    assert_eq!(admin_elsewhere(app, &["orgs", "list", "--json"]).await, before);
}
on_both_backends!(cli, an_operator_manages_organizations_from_the_command_line);
