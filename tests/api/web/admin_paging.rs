//! The admin lists search and page in SQL (issue 10), by keyset with no count per page: the
//! same answers on SQLite and PostgreSQL, `%` and `_` typed in a search match themselves, rows
//! older than any fixed window are still found, and the dashboard's counts stop at 10,000.

use oauth_broker::store::{
    counts::{COUNT_CAP, Count},
    paging::{Cursor, Search, Window},
};

use crate::helpers::TestApp;
use crate::helpers::admin::admin_browser;
use crate::on_both_backends;

async fn found(app: &TestApp, browser: &reqwest::Client, path: &str) -> String {
    let response = browser.get(app.url(path)).send().await.unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.text().await.unwrap()
}

/// The `Next` link of a list page, if it has one.
fn next_link(html: &str) -> Option<String> {
    let start = html.find("rel=\"next\" href=\"")? + "rel=\"next\" href=\"".len();
    let end = start + html[start..].find('"')?;
    Some(html[start..end].replace("&#38;", "&").replace("&amp;", "&"))
}

// Issue 10: the admin tables searched the newest 5,000 rows in memory; now the database does
// it, with a bound LIKE pattern. At a million rows: pages start after the previous page's last
// row (no OFFSET), with no count per page, and an empty search filters nothing.
async fn admin_lists_search_and_page_by_keyset_in_sql_with_like_wildcards_taken_literally(app: &TestApp) {
    let store = &app.state.core.store;
    let issuer = app.state.core.config.issuer();
    for name in ["pct%name", "under_score", "underXscore", "UPPER-Case"] {
        store.users().create_local(&issuer, name, "x", app.now()).await.unwrap();
    }
    for n in 0..41 {
        app.clock.advance(1);
        store.users().create_local(&issuer, &format!("bulk{n:02}"), "x", app.now()).await.unwrap();
    }
    let first = |q: &'static str| async move { store.users().page(&Search::new(q), Window::first(20)).await.unwrap() };
    let names = |page: &oauth_broker::store::paging::Paged<oauth_broker::store::users::User>| {
        page.rows.iter().map(|u| u.username.clone().unwrap_or_default()).collect::<Vec<_>>()
    };
    assert_eq!(names(&first("%").await), vec!["pct%name"], "% matches itself only");
    assert_eq!(names(&first("_").await), vec!["under_score"], "_ matches itself only");
    assert_eq!(names(&first("upper-case").await), vec!["UPPER-Case"], "letters match in either case");
    assert_eq!(names(&first("Under").await).len(), 2);
    let bulk = first("bulk").await;
    assert_eq!(bulk.rows.len(), 20);
    let second = store.users().page(&Search::new("bulk"), Window::after(20, bulk.next.clone().unwrap())).await.unwrap();
    assert_eq!(names(&second).first().map(String::as_str), Some("bulk20"), "the next page starts after the last row");
    let third =
        store.users().page(&Search::new("bulk"), Window::after(20, second.next.clone().unwrap())).await.unwrap();
    assert_eq!((names(&third), third.next), (vec!["bulk40".to_owned()], None), "oldest first, last page");
    let everyone = store.users().page(&Search::new(""), Window::first(100)).await.unwrap();
    assert!(everyone.next.is_none() && everyone.rows.len() >= 47, "alice, bob and the 45 above");

    // The pages show what the store found and link to the next page, which starts where the
    // link says; a position that is not one is refused.
    let admin = admin_browser(app).await;
    let html = found(app, &admin, "/admin/users?q=%25").await;
    assert!(html.contains("1 shown") && html.contains("pct%name") && next_link(&html).is_none(), "{html}");
    let html = found(app, &admin, "/admin/users?q=bulk").await;
    assert!(html.contains("20 shown") && html.contains("more follow"), "{html}");
    let html = found(app, &admin, &next_link(&html).expect("a next link")).await;
    assert!(html.contains("bulk20") && !html.contains("bulk19") && html.contains("rel=\"first\""), "{html}");
    let html = found(app, &admin, &next_link(&html).expect("a next link")).await;
    assert!(html.contains("1 more shown") && html.contains("bulk40") && next_link(&html).is_none(), "{html}");
    let bad = admin.get(app.url("/admin/users?after=page-4")).send().await.unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("not one the list"));

    // 6,000 audit entries: the oldest, beyond the old 5,000-row window, is found by search,
    // and a page deep in the list starts right where its cursor says.
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 6000) \
         INSERT INTO audit_log (at, user_id, action, provider, detail, actor, outcome) \
         SELECT i, NULL, 'test.bulk', NULL, 'row-' || i || '-end', 'broker', 'success' FROM n",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let oldest = store.audit().page(&Search::new("row-1-end"), Window::first(20)).await.unwrap();
    assert_eq!(oldest.rows.len(), 1);
    assert_eq!(oldest.rows[0].detail.as_deref(), Some("row-1-end"));
    let html = found(app, &admin, "/admin/audit?q=row-1-end").await;
    assert!(html.contains("1 shown") && html.contains("row-1-end"), "{html}");
    let oldest_id = oldest.rows[0].id;
    let deep = store
        .audit()
        .page(&Search::new("test.bulk"), Window::after(20, Cursor::new(oldest_id + 20, "")))
        .await
        .unwrap();
    let details: Vec<_> = deep.rows.iter().filter_map(|e| e.detail.as_deref()).collect();
    assert_eq!(
        (details.len(), details.first().copied(), details.last().copied()),
        (20, Some("row-20-end"), Some("row-1-end"))
    );
    assert!(deep.next.is_none());
    let html = found(app, &admin, &format!("/admin/audit?q=test.bulk&after={}", oldest_id + 5)).await;
    assert!(html.contains("5 more shown") && html.contains("row-5-end") && !html.contains("row-6-end"), "{html}");

    // The dashboard counts exactly while that is cheap.
    let counts = store.console().admin_counts(app.now()).await.unwrap();
    assert_eq!(counts.users, Count::Exact(everyone.rows.len() as i64));
    assert_eq!(counts.admins, Count::Exact(1), "bob");
    let html = found(app, &admin, "/admin").await;
    assert!(html.contains(&format!("<strong>{}</strong>", everyone.rows.len())), "{html}");

    // Past 10,000 rows a whole table is estimated and a filtered count says "more than", each
    // reading at most 10,001 rows.
    sqlx::query(&format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {}) \
         INSERT INTO users (id, issuer, subject, username, created_at, is_admin, disabled_at) \
         SELECT 'many-' || i, 'test', 'many-' || i, 'many-' || i, 5, 0, 6 FROM n",
        COUNT_CAP + 5
    ))
    .execute(store.pool())
    .await
    .unwrap();
    let counts = store.console().admin_counts(app.now()).await.unwrap();
    assert!(matches!(counts.users, Count::About(n) if n > COUNT_CAP), "{:?}", counts.users);
    assert_eq!(counts.disabled_users, Count::AtLeast(COUNT_CAP));
    assert_eq!(counts.admins, Count::Exact(1));
    let html = found(app, &admin, "/admin").await;
    assert!(html.contains("more than 10,000") && html.contains("about 10,"), "{html}");
}
on_both_backends!(
    admin_lists_page_in_sql,
    admin_lists_search_and_page_by_keyset_in_sql_with_like_wildcards_taken_literally
);

// Issue 10: searching a grant by its user's name, an authorization by its shown status and a
// consent by its connection's provider still works once the database searches.
async fn searches_find_rows_by_their_users_name_and_their_shown_status(app: &TestApp) {
    let client = app.connected_client(crate::helpers::ALICE).await;
    let store = &app.state.core.store;
    let window = || Window::first(20);
    assert_eq!(store.grants().page(&Search::new("ALIC"), window()).await.unwrap().rows.len(), 1);
    assert_eq!(store.grants().page(&Search::new("bob"), window()).await.unwrap().rows.len(), 0);
    assert_eq!(store.consents().page(&Search::new("alice"), window()).await.unwrap().rows.len(), 1);
    assert_eq!(store.consents().page(&Search::new("demo"), window()).await.unwrap().rows.len(), 1);
    let now = app.now();
    assert_eq!(store.authorizations().page(&Search::new("completed"), now, window()).await.unwrap().rows.len(), 1);
    assert_eq!(
        store
            .audit()
            .page(&Search::new("alice"), window())
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

// Issue 29: at a million rows a rare term is found through a text index (pg_trgm on
// PostgreSQL, FTS5 trigram on SQLite), a common one from the first rows in order, and a short
// one by reading on. Whatever the term holds — LIKE wildcards, quotes, FTS5 syntax, SQL — each
// way finds exactly the rows holding it, as text. The odd rows are the oldest, behind more
// rows than the first step reads, so the index (or the scan) must find them.
async fn any_search_term_finds_exactly_the_rows_holding_it_as_text_through_the_indexes(app: &TestApp) {
    let store = &app.state.core.store;
    let odd = [
        "100%_off",
        "100x_off",
        "say \"hi\" or not",
        "star* near(this) col : val",
        "back\\slash",
        "o'brien'); drop table audit_log; --",
        "żółw swims",
        "zq",
        "^start -minus +plus",
    ];
    for (i, detail) in odd.iter().enumerate() {
        sqlx::query(&format!(
            "INSERT INTO audit_log (at, user_id, action, provider, detail, actor, outcome) \
             VALUES ({i}, 'odd-user', 'test.odd', NULL, $1, 'broker', 'success')"
        ))
        .bind(*detail)
        .execute(store.pool())
        .await
        .unwrap();
    }
    let issuer = app.state.core.config.issuer();
    store.users().create_local(&issuer, "Quentin Quux", "x", app.now()).await.unwrap();
    let quentin = store.users().by_username("Quentin Quux").await.unwrap().unwrap();
    sqlx::query("INSERT INTO audit_log (at, user_id, action, provider, detail, actor, outcome) VALUES (20, $1, 'test.byuser', NULL, 'nothing here', 'broker', 'success')")
        .bind(&quentin.id)
        .execute(store.pool())
        .await
        .unwrap();
    let bulk = oauth_broker::store::search::PROBE_ROWS + 500;
    sqlx::query(&format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {bulk}) \
         INSERT INTO audit_log (at, user_id, action, provider, detail, actor, outcome) \
         SELECT 100 + i, NULL, 'test.bulk', NULL, 'row-' || i, 'broker', 'success' FROM n"
    ))
    .execute(store.pool())
    .await
    .unwrap();

    let details = |q: &str| {
        let search = Search::new(q);
        async move {
            let page = store.audit().page(&search, Window::first(20)).await.unwrap();
            let mut found: Vec<String> = page.rows.into_iter().filter_map(|e| e.detail).collect();
            found.sort();
            found
        }
    };
    for term in [
        "%",
        "_",
        "0%_",
        "x_o",
        "\"hi\"",
        "\" or \"",
        "star*",
        "near(this)",
        "col : val",
        "col:",
        "\\",
        "back\\s",
        "'); drop table",
        "--",
        "ŻÓŁW",
        "zq",
        "^start",
        "-minus",
        "+plus",
        "*",
        "\"",
    ] {
        let needle = term.to_lowercase();
        let mut expected: Vec<String> =
            odd.iter().filter(|d| d.to_lowercase().contains(&needle)).map(|d| (*d).to_owned()).collect();
        expected.sort();
        assert_eq!(details(term).await, expected, "{term:?}");
    }
    // A row found by its user's name, through the users' index.
    assert_eq!(details("quentin q").await, vec!["nothing here"]);
    // A common term fills a page from the newest rows; the next page goes on from there.
    let page = store.audit().page(&Search::new("row-"), Window::first(20)).await.unwrap();
    assert_eq!(page.rows.first().and_then(|e| e.detail.as_deref()), Some(format!("row-{bulk}").as_str()));
    let next = store.audit().page(&Search::new("row-"), Window::after(20, page.next.unwrap())).await.unwrap();
    assert_eq!(next.rows.first().and_then(|e| e.detail.as_deref()), Some(format!("row-{}", bulk - 20).as_str()));
    // A term only older rows hold (row-4, row-40…, row-400…: behind the first step's rows)
    // pages by keyset through the index.
    let rare = store.audit().page(&Search::new("row-4"), Window::first(5)).await.unwrap();
    let shown: Vec<_> = rare.rows.iter().filter_map(|e| e.detail.clone()).collect();
    assert_eq!(shown, ["row-499", "row-498", "row-497", "row-496", "row-495"]);
    let after = store.audit().page(&Search::new("row-4"), Window::after(5, rare.next.unwrap())).await.unwrap();
    assert_eq!(after.rows.first().and_then(|e| e.detail.as_deref()), Some("row-494"));
    assert!(after.rows.iter().all(|e| !shown.contains(e.detail.as_ref().unwrap())));
    assert!(after.rows.iter().all(|e| e.id < rare.rows.last().unwrap().id), "older than the cursor");
    // The page refuses a NUL outright (it ended SQLite's pattern early, matching every row).
    let admin = admin_browser(app).await;
    let refused = admin.get(app.url("/admin/audit?q=odd%00")).send().await.unwrap();
    assert_eq!(refused.status(), 400);
    let html = found(app, &admin, "/admin/audit?q=%22hi%22").await;
    assert!(html.contains("1 shown"), "{html}");
}
on_both_backends!(
    admin_search_terms_are_text,
    any_search_term_finds_exactly_the_rows_holding_it_as_text_through_the_indexes
);
