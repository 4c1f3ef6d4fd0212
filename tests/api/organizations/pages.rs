//! The admin pages of organizations, as an operator (the deployment's admin) reads them: the
//! list, searched and paged; one organization's members, paged; a user's organizations; the
//! organization of each service. Bad addresses get a page that says what to do.

use oauth_broker::domain::{OrgRole, OrgSlug};

use crate::helpers::admin::admin_browser;
use crate::helpers::token_api::{ServiceOptions, register_service};
use crate::helpers::*;
use crate::on_both_backends;

async fn get(app: &TestApp, browser: &reqwest::Client, path: &str) -> (u16, String) {
    let response = browser.get(app.url(path)).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

async fn an_operator_reads_organizations_and_their_members(app: &TestApp) {
    let store = &app.state.core.store;
    let acme = store.organizations().create(&OrgSlug::parse("acme").unwrap(), "Acme <Corp>", app.now()).await.unwrap();
    let alice = app.user_id(ALICE).await;
    store.in_org(&acme.id).members().add(&alice, OrgRole::Admin, app.now()).await.unwrap();
    let issuer = app.state.core.config.issuer();
    for n in 0..60 {
        store
            .users()
            .create_local_in(&acme.id, OrgRole::Member, &issuer, &format!("worker{n:02}"), "x", app.now() + 1 + n)
            .await
            .unwrap();
    }
    register_service(app, "acme-notes", &["demo"], ServiceOptions { org: Some(&acme.id), ..Default::default() }).await;
    let admin = admin_browser(app).await;

    let (status, list) = get(app, &admin, "/admin/orgs").await;
    assert_eq!(status, 200);
    assert!(list.contains("href=\"/admin/orgs/acme\"") && list.contains("href=\"/admin/orgs/default\""), "{list}");
    assert!(list.contains("Acme &") && !list.contains("<Corp>"), "names are escaped");
    let (_, found) = get(app, &admin, "/admin/orgs?q=ACME").await;
    assert!(found.contains("/admin/orgs/acme") && !found.contains("/admin/orgs/default\""), "{found}");

    // 61 members, a page at a time, oldest first: alice (who joined first) leads, and every
    // worker is on exactly one page.
    let (status, first) = get(app, &admin, "/admin/orgs/acme").await;
    assert_eq!(status, 200);
    assert!(first.contains(&format!("/admin/users/{alice}")), "members link to their user page");
    assert!(first.contains(acme.id.as_str()), "the page names the organization's id");
    let on = |page: &str, n: usize| page.contains(&format!(">worker{n:02}<"));
    let mut seen = vec![0; 60];
    let mut pages = 0;
    let mut page = first;
    loop {
        pages += 1;
        for (n, count) in seen.iter_mut().enumerate() {
            *count += usize::from(on(&page, n));
        }
        let Some(next) = page.split("after=").nth(1).and_then(|rest| rest.split('"').next()) else { break };
        let (status, body) = get(app, &admin, &format!("/admin/orgs/acme?after={}", next.replace("&amp;", "&"))).await;
        assert_eq!(status, 200);
        page = body;
        assert!(pages < 10, "the pages end");
    }
    assert!(pages > 1, "more than one page");
    assert!(seen.iter().all(|count| *count == 1), "no gap, no repeat: {seen:?}");

    // The user page names her organizations; the services list, each service's.
    let (_, user) = get(app, &admin, &format!("/admin/users/{alice}")).await;
    assert!(user.contains("/admin/orgs/acme") && user.contains("/admin/orgs/default"), "{user}");
    let (_, services) = get(app, &admin, "/admin/services").await;
    assert!(services.contains("acme"), "{services}");

    // Bad addresses.
    let (status, page) = get(app, &admin, "/admin/orgs/nope").await;
    assert_eq!(status, 404);
    assert!(page.contains("There is no organization with this slug"), "{page}");
    let (status, _) = get(app, &admin, "/admin/orgs/Not%20A%20Slug").await;
    assert_eq!(status, 404);
    let (status, page) = get(app, &admin, "/admin/orgs/acme?q=worker").await;
    assert_eq!(status, 400);
    assert!(page.contains("Search people on the Users page"), "{page}");

    // Alice is acme's admin but not the deployment's: the operator's pages are not hers.
    let browser = app.browser();
    assert_eq!(app.sign_in(&browser, ALICE, "/").await.status(), 303);
    for path in ["/admin/orgs", "/admin/orgs/acme", "/admin/orgs/default"] {
        assert_eq!(get(app, &browser, path).await.0, 403, "{path}");
    }
}
on_both_backends!(pages, an_operator_reads_organizations_and_their_members);
