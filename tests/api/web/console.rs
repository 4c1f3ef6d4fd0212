//! Issue 29, the operator's console: every admin page is a table with a header row on a
//! desktop (1280 px) and cards that fit a phone (390 px); the dashboard draws its charts as
//! inline SVG from the hourly counts the database keeps (migration 0028) on both backends; the
//! provider, service and user pages show their rows. Screenshots go to
//! `target/screenshots/<page>-<width>.png`.

use std::path::PathBuf;

use oauth_broker::store::audit::{Actor, AuditEvent, Outcome};
use oauth_broker::store::gateway::ListKind;
use oauth_broker::store::gateway::NewGatewayConsent;
use serde_json::json;

use crate::helpers::admin::{ADMIN_GETS, admin_browser};
use crate::helpers::browser::{Browser, DESKTOP, PHONE};
use crate::helpers::token_api::{ServiceOptions, register_service};
use crate::helpers::{ALICE, BOB, Backend, TestApp, spawn_app};
use crate::on_both_backends;

/// Alice connected through an MCP client (a grant, a consent, a completed authorization, audit
/// rows), a service with a consent-free history of token-API answers, and a server behind the
/// broker that alice allowed her client to call: (alice, the service, the server).
async fn a_broker_in_use(app: &TestApp) -> (String, String, String) {
    let client = app.connected_client(ALICE).await;
    client.close().await;
    let service = register_service(app, "notes", &["demo"], ServiceOptions::default()).await;
    let alice = app.user_id(ALICE).await;
    for (outcome, n) in [(Outcome::Success, 3), (Outcome::Refused, 1)] {
        for _ in 0..n {
            let event = AuditEvent::new(Actor::Service(&service.client_id), "token_api.token", Some(&alice))
                .provider(Some("demo"))
                .detail(Some("answer=token"))
                .outcome(outcome);
            app.state.core.store.audit().record(app.now(), event).await.unwrap();
        }
    }
    // Nothing answers at its URL: the page shows what is registered, not what the server says.
    crate::helpers::gateway::servers_ok(app, &["add", "crm", "--url", "http://127.0.0.1:9/mcp", "--auth", "none"])
        .await;
    let server = app.state.core.store.gateway_servers().by_name("crm").await.unwrap().expect("registered").id;
    let approval = NewGatewayConsent {
        user_id: &alice,
        client_key: "oauth:console-client",
        server_id: &server,
        client_name: Some("Console Client"),
    };
    assert!(app.state.core.store.gateway_consents().record(&approval, app.now()).await.unwrap());
    (alice, service.client_id, server)
}

/// Every admin page, with the one-thing pages of Alice, the service and the server.
fn pages((alice, service, server): &(String, String, String)) -> Vec<String> {
    let mut pages: Vec<String> = ADMIN_GETS.iter().map(|p| p.to_string()).collect();
    pages.extend([
        format!("/admin/users/{alice}"),
        format!("/admin/services/{service}"),
        format!("/admin/servers/{server}"),
    ]);
    pages
}

/// `/admin/users/u-1` → `admin-users-detail`; `/admin` → `admin`.
fn slug(path: &str, (alice, service, server): &(String, String, String)) -> String {
    path.replace(alice, "detail")
        .replace(service, "detail")
        .replace(server, "detail")
        .trim_matches('/')
        .replace('/', "-")
}

fn screenshot_path(name: &str, width: u32) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{name}-{width}.png"))
}

/// Saves what the window shows; on a desktop the window first grows to the page's height (up
/// to 4,000 px), so the whole page is in the picture, and shrinks back after.
async fn save_screenshot(browser: &Browser, name: &str, (width, height): (u32, u32)) {
    let whole = browser.js("return document.documentElement.scrollHeight").await.as_u64().unwrap_or(800) as u32;
    let grow = width >= DESKTOP.0 && whole > height;
    if grow {
        browser.client.set_window_size(width, whole.min(4000) + 140).await.unwrap();
    }
    let png = browser.client.screenshot().await.unwrap();
    std::fs::write(screenshot_path(name, width), png).unwrap();
    if grow {
        browser.client.set_window_size(width, height).await.unwrap();
    }
}

/// How every table of the page lays out: (display of the header, or `hidden` when it takes no
/// room; display of a row).
async fn table_layout(browser: &Browser) -> Vec<(String, String)> {
    let report = browser
        .js(r#"
            return [...document.querySelectorAll('table.list')].map(t => {
                const head = t.tHead;
                const row = t.querySelector('tbody tr') || head.rows[0];
                const box = head.getBoundingClientRect();
                const shown = e => box.height > 1 && box.width > 1 ? getComputedStyle(e).display : 'hidden';
                return [shown(head), getComputedStyle(row).display];
            });
        "#)
        .await;
    serde_json::from_value(report).unwrap()
}

/// Tables whose frame scrolls sideways (wider than the frame), as `id: scroll > frame`.
async fn tables_scrolling_sideways(browser: &Browser) -> Vec<String> {
    let report = browser
        .js(r#"return [...document.querySelectorAll('.table-wrap, .numbers-wrap')]
                 .filter(w => w.scrollWidth > w.clientWidth)
                 .map(w => `${(w.querySelector('table') || w).id}: ${w.scrollWidth} > ${w.clientWidth}`)"#)
        .await;
    serde_json::from_value(report).unwrap()
}

/// The admin nav's links marked `aria-current`, as (href, value), and whether each is drawn
/// unlike the unmarked links (its weight and underline).
async fn nav_marks(browser: &Browser) -> Vec<(String, String, bool)> {
    let report = browser
        .js(r#"
            const links = [...document.querySelectorAll('nav.admin a')];
            const look = a => { const s = getComputedStyle(a); return s.fontWeight + ' ' + s.borderBottomColor; };
            const plain = links.filter(a => !a.hasAttribute('aria-current')).map(look);
            return links.filter(a => a.hasAttribute('aria-current'))
                .map(a => [a.getAttribute('href'), a.getAttribute('aria-current'), !plain.includes(look(a))]);
        "#)
        .await;
    serde_json::from_value(report).unwrap()
}

/// Where the nav should point from `path`: its own link, or the list a one-thing page is in.
fn nav_expected(path: &str) -> (String, String) {
    for list in ["/admin/users/", "/admin/services/", "/admin/servers/"] {
        if path.starts_with(list) {
            return (list.trim_end_matches('/').to_owned(), "true".to_owned());
        }
    }
    (path.to_owned(), "page".to_owned())
}

// At 1280 px every admin page is a table with a visible header row, no table scrolls sideways
// in its frame (the grants table had twelve columns), the nav marks where the admin is, and the
// dashboard has its four charts, each with its numbers; the pages' screenshots are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_desktop_every_admin_page_is_a_table_and_the_dashboard_draws_charts() {
    let Some(browser) = Browser::start(DESKTOP).await else { return };
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let in_use = a_broker_in_use(&app).await;
    let alice = in_use.0.clone();
    // A refresh the provider refused, so the grants table shows a last error too.
    let event = AuditEvent::new(Actor::Broker, "grant.needs_reconsent", Some(&alice))
        .provider(Some("demo"))
        .detail(Some("error=\"invalid_grant\" description=\"the refresh token was revoked by the resource owner\""))
        .outcome(Outcome::Failure);
    app.state.core.store.audit().record(app.now(), event).await.unwrap();
    app.state.core.store.users().set_admin(&app.user_id(BOB).await, true).await.unwrap();
    browser.sign_in(&app, BOB, "/admin").await;

    for path in pages(&in_use) {
        browser.open(&app.url(&path)).await;
        let layout = table_layout(&browser).await;
        assert!(!layout.is_empty(), "{path} has a table");
        for (head, row) in &layout {
            assert_eq!(
                (head.as_str(), row.as_str()),
                ("table-header-group", "table-row"),
                "{path} lays out as a table"
            );
        }
        let page_width = browser.js("return document.documentElement.scrollWidth <= window.innerWidth").await;
        assert_eq!(page_width, json!(true), "{path} fits 1280 px");
        assert_eq!(tables_scrolling_sideways(&browser).await, Vec::<String>::new(), "{path} at 1280 px");
        let (href, current) = nav_expected(&path);
        assert_eq!(nav_marks(&browser).await, vec![(href, current, true)], "{path}: the nav marks it, visibly");
        save_screenshot(&browser, &slug(&path, &in_use), DESKTOP).await;
    }

    for range in ["24h", "7d"] {
        browser.open(&app.url(&format!("/admin?range={range}"))).await;
        let charts = browser
            .js(r#"return [...document.querySelectorAll('#charts figure.chart')].map(f =>
                   [f.id, !!f.querySelector('svg'), f.querySelectorAll('svg rect').length, f.querySelectorAll('table.numbers tr').length])"#)
            .await;
        let charts: Vec<(String, bool, u64, u64)> = serde_json::from_value(charts).unwrap();
        let ids: Vec<&str> = charts.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(ids, ["chart-authorizations", "chart-refresh-failures", "chart-token-api", "chart-sign-ins"]);
        assert!(charts.iter().all(|c| c.1), "each chart is an SVG: {charts:?}");
        let by_id = |id: &str| charts.iter().find(|c| c.0 == id).cloned().unwrap();
        assert!(by_id("chart-authorizations").2 >= 1 && by_id("chart-authorizations").3 >= 1, "{charts:?}");
        assert_eq!(by_id("chart-token-api").3, 2, "svc_notes and svc_notes · refused: {charts:?}");
        let text = browser.text().await;
        assert!(text.contains("completed"), "the numbers behind the chart: {text}");
    }
    save_screenshot(&browser, "admin-7d", DESKTOP).await;

    browser.close().await;
    app.stop().await;
}

// At 390 px the same pages show cards (no header row on screen) and nothing is wider than the
// phone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_phone_every_admin_page_shows_cards_and_nothing_overflows() {
    let Some(browser) = Browser::start(PHONE).await else { return };
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let in_use = a_broker_in_use(&app).await;
    app.state.core.store.users().set_admin(&app.user_id(BOB).await, true).await.unwrap();
    browser.sign_in(&app, BOB, "/admin").await;

    for path in pages(&in_use) {
        browser.open(&app.url(&path)).await;
        for (head, row) in table_layout(&browser).await {
            assert_eq!((head.as_str(), row.as_str()), ("hidden", "block"), "{path} shows cards");
        }
        assert_eq!(browser.sideways_overflow().await, Vec::<String>::new(), "{path} on a phone");
        let fits = browser.js("return document.documentElement.scrollWidth <= window.innerWidth").await;
        assert_eq!(fits, json!(true), "{path} fits 390 px");
        save_screenshot(&browser, &slug(&path, &in_use), PHONE).await;
    }

    browser.close().await;
    app.stop().await;
}

// The dashboard's hourly counts follow what happens, kept by the database on both backends:
// an authorization's end, a token-API answer, a sign-in; refresh failures by provider and kind.
async fn the_dashboard_counts_what_happened(app: &TestApp) {
    let (alice, service, server) = a_broker_in_use(app).await;
    let admin = admin_browser(app).await;
    let counts = app.state.core.store.console().hourly_counts(app.now() - 3600).await.unwrap();
    let at = |series: &str, label: &str, sub: &str| {
        counts.iter().filter(|c| c.series == series && c.label == label && c.sub == sub).map(|c| c.n).sum::<i64>()
    };
    assert_eq!(at("authorizations", "completed", ""), 1, "{counts:?}");
    assert_eq!(at("token_api", &service, "success"), 3, "{counts:?}");
    assert_eq!(at("token_api", &service, "refused"), 1, "{counts:?}");
    assert!(at("sign_ins", "", "") >= 1, "Bob signed in: {counts:?}");

    let html = admin.get(app.url("/admin")).send().await.unwrap().text().await.unwrap();
    assert!(html.contains("id=\"chart-authorizations\"") && html.contains("<svg"), "{html}");
    assert!(html.contains("completed: 1 from "), "a bar says what it counts: {html}");
    let refused = admin.get(app.url("/admin?range=1y")).send().await.unwrap();
    assert_eq!(refused.status(), 400);

    // The service's own page lists its answers; the providers page its health.
    let html = admin.get(app.url(&format!("/admin/services/{service}"))).send().await.unwrap().text().await.unwrap();
    assert_eq!(html.matches("token_api.token").count(), 4, "{html}");
    let html = admin.get(app.url("/admin/providers")).send().await.unwrap().text().await.unwrap();
    assert!(html.contains("grants in backoff now"), "{html}");
    assert_eq!(admin.get(app.url("/admin/users/no-such-user")).send().await.unwrap().status(), 404);

    // The server's own page lists who allowed which client to call it, linked from the list and
    // from the user's page.
    let html = admin.get(app.url("/admin/servers")).send().await.unwrap().text().await.unwrap();
    assert!(html.contains(&format!("href=\"/admin/servers/{server}\"")), "{html}");
    assert!(html.contains("not read yet (its connect tool is listed)"), "nothing read of it yet: {html}");
    let html = admin.get(app.url(&format!("/admin/servers/{server}"))).send().await.unwrap().text().await.unwrap();
    assert!(html.contains("Console Client") && html.contains(&format!("href=\"/admin/users/{alice}\"")), "{html}");
    assert!(html.contains("not read yet: no user has connected it"), "nothing answers at its URL: {html}");
    // Once an instance has read its lists, the page says how many it listed.
    let tools = r#"[{"name":"a","inputSchema":{"type":"object"}},{"name":"b","inputSchema":{"type":"object"}}]"#;
    app.state.core.store.gateway_lists().put(&server, ListKind::Tools, tools, app.now()).await.unwrap();
    let html = admin.get(app.url(&format!("/admin/servers/{server}"))).send().await.unwrap().text().await.unwrap();
    assert!(html.contains("2 (the list last changed ") && html.contains("not read (templates: not read)"), "{html}");
    // The list of servers counts them too.
    let html = admin.get(app.url("/admin/servers")).send().await.unwrap().text().await.unwrap();
    assert!(!html.contains("not read yet") && html.contains(">2<"), "{html}");
    let html = admin.get(app.url(&format!("/admin/users/{alice}"))).send().await.unwrap().text().await.unwrap();
    assert!(html.contains(&format!("href=\"/admin/servers/{server}\"")), "{html}");
    assert_eq!(admin.get(app.url("/admin/servers/no-such-server")).send().await.unwrap().status(), 404);

    // Filters read their own index: the one refused answer; the completed authorization; an
    // unknown choice is refused (a filter with a search: `console_filters`).
    let html =
        admin.get(app.url("/admin/audit?outcome=refused&order=oldest")).send().await.unwrap().text().await.unwrap();
    assert!(html.contains("1 shown") && html.contains("token_api.token"), "{html}");
    let html = admin.get(app.url("/admin/authorizations?status=completed")).send().await.unwrap().text().await.unwrap();
    assert!(html.contains("1 shown") && html.contains("<option value=\"completed\" selected>"), "{html}");
    for bad in ["/admin/audit?outcome=maybe", "/admin/authorizations?status=done"] {
        assert_eq!(admin.get(app.url(bad)).send().await.unwrap().status(), 400, "{bad}");
    }
}
on_both_backends!(the_dashboard_counts_what_happened_on, the_dashboard_counts_what_happened);
