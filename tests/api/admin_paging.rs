//! The admin lists search, count and page in SQL (issue 10): the same answers on SQLite and
//! PostgreSQL, `%` and `_` typed in a search match themselves, and rows older than any fixed
//! window are still found.

use oauth_broker::store::paging::{Search, Window};

use crate::admin::admin_browser;
use crate::helpers::TestApp;
use crate::on_both_backends;

async fn found(app: &TestApp, browser: &reqwest::Client, path: &str) -> String {
    let response = browser.get(app.url(path)).send().await.unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.text().await.unwrap()
}

// Issue 10: the admin tables searched the newest 5,000 rows in memory; now the database does
// it, with a bound LIKE pattern.
async fn admin_lists_search_count_and_page_in_sql_with_like_wildcards_taken_literally(app: &TestApp) {
    let store = &app.state.store;
    let issuer = app.state.config.issuer();
    for name in ["pct%name", "under_score", "underXscore", "UPPER-Case"] {
        store.create_local_user(&issuer, name, "x", app.now()).await.unwrap();
    }
    for n in 0..41 {
        app.clock.advance(1);
        store.create_local_user(&issuer, &format!("bulk{n:02}"), "x", app.now()).await.unwrap();
    }
    let count = |q: &'static str| async move { store.page_users(&Search::new(q), Window::page(1, 20)).await.unwrap() };
    let names = |page: &oauth_broker::store::paging::Paged<oauth_broker::store::users::User>| {
        page.rows.iter().map(|u| u.username.clone().unwrap_or_default()).collect::<Vec<_>>()
    };
    assert_eq!(names(&count("%").await), vec!["pct%name"], "% matches itself only");
    assert_eq!(names(&count("_").await), vec!["under_score"], "_ matches itself only");
    assert_eq!(names(&count("upper-case").await), vec!["UPPER-Case"], "letters match in either case");
    assert_eq!(names(&count("Under").await).len(), 2);
    let bulk = count("bulk").await;
    assert_eq!((bulk.total, bulk.rows.len()), (41, 20));
    let third = store.page_users(&Search::new("bulk"), Window::page(3, 20)).await.unwrap();
    assert_eq!((third.total, names(&third)), (41, vec!["bulk40".to_owned()]), "oldest first, last page");
    let everyone = store.page_users(&Search::new(""), Window::page(1, 100)).await.unwrap();
    assert_eq!(everyone.total, everyone.rows.len() as i64);
    assert!(everyone.total >= 47, "alice, bob and the 45 above");

    // The pages show what the store found, and refuse a page past the end.
    let admin = admin_browser(app).await;
    let html = found(app, &admin, "/admin/users?q=%25").await;
    assert!(html.contains("1 found") && html.contains("pct%name"), "{html}");
    let html = found(app, &admin, "/admin/users?q=bulk&page=3").await;
    assert!(html.contains("41 found") && html.contains("page 3 of 3") && html.contains("bulk40"), "{html}");
    let past = admin.get(app.url("/admin/users?q=bulk&page=4")).send().await.unwrap();
    assert_eq!(past.status(), 404);
    assert!(past.text().await.unwrap().contains("There is no page 4 of this list: it has 3."));

    // 6,000 audit entries: the oldest, beyond the old 5,000-row window, is found by search.
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 6000) \
         INSERT INTO audit_log (at, user_id, action, provider, detail, actor, outcome) \
         SELECT i, NULL, 'test.bulk', NULL, 'row-' || i || '-end', 'broker', 'success' FROM n",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let oldest = store.page_audit(&Search::new("row-1-end"), Window::page(1, 20)).await.unwrap();
    assert_eq!(oldest.total, 1);
    assert_eq!(oldest.rows[0].detail.as_deref(), Some("row-1-end"));
    let html = found(app, &admin, "/admin/audit?q=row-1-end").await;
    assert!(html.contains("1 found") && html.contains("row-1-end"), "{html}");
    let html = found(app, &admin, "/admin/audit?q=test.bulk&page=300").await;
    assert!(html.contains("6000 found") && html.contains("page 300 of 300") && html.contains("row-1-end"), "{html}");

    // The dashboard counts in SQL too.
    let counts = store.admin_counts(app.now()).await.unwrap();
    assert_eq!(counts.users, everyone.total);
    assert_eq!(counts.admins, 1, "bob");
    let html = found(app, &admin, "/admin").await;
    assert!(html.contains(&everyone.total.to_string()), "{html}");
}
on_both_backends!(
    admin_lists_page_in_sql,
    admin_lists_search_count_and_page_in_sql_with_like_wildcards_taken_literally
);

// Issue 10: searching a grant by its user's name, an authorization by its shown status and a
// consent by its connection's provider still works once the database searches.
async fn searches_find_rows_by_their_users_name_and_their_shown_status(app: &TestApp) {
    let client = app.connected_client(crate::helpers::ALICE).await;
    let store = &app.state.store;
    let window = Window::page(1, 20);
    assert_eq!(store.page_grants(&Search::new("ALIC"), window).await.unwrap().total, 1);
    assert_eq!(store.page_grants(&Search::new("bob"), window).await.unwrap().total, 0);
    assert_eq!(store.page_consents(&Search::new("alice"), window).await.unwrap().total, 1);
    assert_eq!(store.page_consents(&Search::new("demo"), window).await.unwrap().total, 1);
    let now = app.now();
    assert_eq!(store.page_authorizations(&Search::new("completed"), now, window).await.unwrap().total, 1);
    assert_eq!(
        store
            .page_audit(&Search::new("alice"), window)
            .await
            .unwrap()
            .rows
            .iter()
            .filter(|e| e.action == "grant.stored")
            .count(),
        1
    );
    client.close().await;
}
on_both_backends!(admin_searches_by_user_and_status, searches_find_rows_by_their_users_name_and_their_shown_status);
