//! Issue 29, the console's lists and dashboard at a desktop: a filter combines with a search
//! (the search narrows by its text index, the filter keeps what it admits, pages by keyset), on
//! both backends; the dashboard counts the MCP sessions this instance holds.

use std::time::Duration;

use crate::helpers::admin::admin_browser;
use crate::helpers::{ALICE, BOB, ClientKind, TestApp, eventually};
use crate::on_both_backends;

async fn page(app: &TestApp, browser: &reqwest::Client, path: &str) -> String {
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

/// `n` audit rows with this outcome and detail (`{i}` is the row's number), in one statement.
async fn audit_rows(app: &TestApp, n: u32, outcome: &str, detail: &str) {
    let detail = detail.replace("{i}", "' || i || '");
    sqlx::query(&format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n}) \
         INSERT INTO audit_log (at, user_id, action, provider, detail, actor, outcome) \
         SELECT {at}, NULL, 'test.filtered', NULL, '{detail}', 'broker', '{outcome}' FROM n",
        at = app.now()
    ))
    .execute(app.state.core.store.pool())
    .await
    .unwrap();
}

// Issue 29: `?outcome=refused&q=…` and `?status=completed&q=…` were refused with a 400 (a list
// was either searched or filtered). Now both apply: rows that match only the search or only the
// filter are left out, whether the page is found by the probe (a common term) or through the
// text index (a rare one behind thousands of filtered rows), and the next page keeps both.
async fn a_filter_and_a_search_combine_on_the_audit_log_and_the_authorizations(app: &TestApp) {
    let client = app.connected_client(ALICE).await;
    client.close().await;
    let admin = admin_browser(app).await;

    // Oldest first: the rare rows (refused + "needle-rare"; success + "needle-rare"), then
    // 3,500 refused rows without the term (more than the probe reads), then 25 refused and 25
    // successful "needle-common" rows, interleaved.
    audit_rows(app, 1, "refused", "needle-rare both").await;
    audit_rows(app, 1, "success", "needle-rare search only").await;
    audit_rows(app, 3500, "refused", "filter only {i}").await;
    for i in 0..25 {
        audit_rows(app, 1, "refused", &format!("needle-common both {i:02}")).await;
        audit_rows(app, 1, "success", &format!("needle-common search only {i:02}")).await;
    }

    let html = page(app, &admin, "/admin/audit?outcome=refused&q=needle-rare").await;
    assert!(html.contains("1 shown") && html.contains("needle-rare both"), "{html}");
    assert!(!html.contains("search only") && !html.contains("filter only"), "{html}");

    let html = page(app, &admin, "/admin/audit?outcome=refused&q=needle-common").await;
    assert!(html.contains("20 shown") && html.contains("more follow"), "{html}");
    assert!(html.contains("needle-common both 24") && !html.contains("search only"), "{html}");
    let next = next_link(&html).expect("a next link");
    assert!(next.contains("q=needle-common") && next.contains("outcome=refused"), "{next}");
    let html = page(app, &admin, &next).await;
    assert!(html.contains("5 more shown") && html.contains("needle-common both 04"), "{html}");
    assert!(html.contains("needle-common both 00") && !html.contains("search only"), "{html}");
    assert!(!html.contains("needle-common both 05") && next_link(&html).is_none(), "{html}");

    let html = page(app, &admin, "/admin/audit?outcome=success&order=oldest&q=needle").await;
    let first = html.find("needle-rare search only").expect("the oldest successful needle");
    let later = html.find("needle-common search only 00").expect("then the next");
    assert!(first < later && !html.contains("both"), "{html}");
    // The search form keeps the filters, the filter form the search.
    assert!(html.contains("<input type=\"hidden\" name=\"outcome\" value=\"success\">"), "{html}");
    assert!(html.contains("<input type=\"hidden\" name=\"q\" value=\"needle\">"), "{html}");

    // Authorizations, by the status the list shows: Alice's completed one and, copied from
    // it, one completed and one failed that hold "needle" in their id, one completed that
    // does not, and an open one past its expiry (shown `expired`).
    let now = app.now();
    for (id, status, expires_at) in [
        ("authz-needle-1", "completed", now + 600),
        ("authz-needle-2", "failed", now + 600),
        ("authz-other-3", "completed", now + 600),
        ("authz-needle-4", "pending", now - 1),
    ] {
        sqlx::query(&format!(
            "INSERT INTO authorizations (id, user_id, provider, scopes, client_key, kind, status, created_at, expires_at, updated_at) \
             SELECT '{id}', user_id, provider, scopes, client_key, kind, '{status}', {now}, {expires_at}, {now} \
             FROM authorizations WHERE status = 'completed' AND id NOT LIKE 'authz-%'"
        ))
        .execute(app.state.core.store.pool())
        .await
        .unwrap();
    }
    let html = page(app, &admin, "/admin/authorizations?status=completed&q=needle").await;
    assert!(html.contains("1 shown") && html.contains("authz-needle-1"), "{html}");
    assert!(!html.contains("authz-needle-2") && !html.contains("authz-other-3"), "{html}");
    let html = page(app, &admin, "/admin/authorizations?status=expired&q=needle").await;
    assert!(html.contains("1 shown") && html.contains("authz-needle-4"), "{html}");
    let html = page(app, &admin, "/admin/authorizations?status=completed").await;
    assert!(html.contains("3 shown") && html.contains("authz-other-3"), "{html}");

    // An unknown choice is still refused.
    for bad in ["/admin/audit?outcome=maybe&q=x", "/admin/authorizations?status=done&q=needle"] {
        assert_eq!(admin.get(app.url(bad)).send().await.unwrap().status(), 400, "{bad}");
    }
}
on_both_backends!(filters_and_searches_combine, a_filter_and_a_search_combine_on_the_audit_log_and_the_authorizations);

// Issue 29: `status=expired` spans three stored statuses. It is read as one ordered read per
// status, merged; the pages must still be newest first across the three, page by keyset
// without a row lost or repeated, and leave out open attempts not yet expired.
async fn the_expired_filter_pages_newest_first_across_the_open_statuses(app: &TestApp) {
    let client = app.connected_client(ALICE).await;
    client.close().await;
    let admin = admin_browser(app).await;
    let now = app.now();
    // 25 expired attempts, the statuses taking turns, each a second newer than the one before;
    // between them, open attempts that have not expired and finished ones.
    for i in 0..25i64 {
        let status = ["pending", "redirected", "exchanging"][(i % 3) as usize];
        for (id, status, expires_at) in [
            (format!("authz-exp-{i:02}"), status, now - 1),
            (format!("authz-open-{i:02}"), status, now + 600),
            (format!("authz-done-{i:02}"), "completed", now - 1),
        ] {
            sqlx::query(&format!(
                "INSERT INTO authorizations (id, user_id, provider, scopes, client_key, kind, status, created_at, expires_at, updated_at) \
                 SELECT '{id}', user_id, provider, scopes, client_key, kind, '{status}', {created}, {expires_at}, {created} \
                 FROM authorizations WHERE status = 'completed' AND id NOT LIKE 'authz-%'",
                created = now - 1000 + i,
            ))
            .execute(app.state.core.store.pool())
            .await
            .unwrap();
        }
    }
    let shown_ids = |html: &str| -> Vec<String> {
        let id_at = |at: usize| {
            let rest = &html[at..];
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).unwrap_or(rest.len());
            rest[..end].to_owned()
        };
        html.match_indices("authz-").map(|(at, _)| id_at(at)).fold(Vec::new(), |mut ids, id| {
            if ids.last() != Some(&id) {
                ids.push(id);
            }
            ids
        })
    };
    let first = page(app, &admin, "/admin/authorizations?status=expired").await;
    let mut seen = shown_ids(&first);
    let next = next_link(&first).unwrap_or_else(|| panic!("a second page after {seen:?}"));
    assert!(next.contains("status=expired"), "{next}");
    let second = page(app, &admin, &next).await;
    assert!(next_link(&second).is_none(), "{second}");
    seen.extend(shown_ids(&second));
    let expected: Vec<String> = (0..25).rev().map(|i| format!("authz-exp-{i:02}")).collect();
    assert_eq!(seen, expected, "newest first, every expired attempt once, nothing else");

    // An open status shows only the attempts not yet expired, newest first: read through the
    // status and expiry index and sorted, not by walking every abandoned attempt.
    let pending = shown_ids(&page(app, &admin, "/admin/authorizations?status=pending").await);
    let expected: Vec<String> = (0..25).rev().filter(|i| i % 3 == 0).map(|i| format!("authz-open-{i:02}")).collect();
    assert_eq!(pending, expected, "the pending attempts not yet expired, newest first");
}
on_both_backends!(expired_filter_pages, the_expired_filter_pages_newest_first_across_the_open_statuses);

/// The number on the dashboard's tile for MCP sessions.
async fn mcp_sessions_tile(app: &TestApp, admin: &reqwest::Client) -> Option<u64> {
    let html = page(app, admin, "/admin").await;
    let label = "MCP sessions open on this instance</a> <strong>";
    let start = html.find(label)? + label.len();
    html[start..].split('<').next()?.parse().ok()
}

// Issue 29: the dashboard counted browser sessions but not MCP sessions. It now shows the ones
// this instance holds, from its own session table (no query), as they open and close.
async fn the_dashboard_counts_the_mcp_sessions_this_instance_holds(app: &TestApp) {
    let admin = admin_browser(app).await;
    assert_eq!(mcp_sessions_tile(app, &admin).await, Some(0));
    let alice = app.mcp_client(ALICE, ClientKind::Url).await;
    let bob = app.mcp_client(BOB, ClientKind::Url).await;
    assert_eq!(mcp_sessions_tile(app, &admin).await, Some(2));
    alice.close().await;
    eventually("Alice's session is no longer counted", Duration::from_secs(20), || async {
        let shown = mcp_sessions_tile(app, &admin).await;
        (shown == Some(1)).then_some(()).ok_or(format!("{shown:?}"))
    })
    .await;
    bob.close().await;
}
on_both_backends!(mcp_sessions_on_the_dashboard, the_dashboard_counts_the_mcp_sessions_this_instance_holds);
