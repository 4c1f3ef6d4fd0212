//! The hosted pages in a real browser: headless Chromium driven over WebDriver (fantoccini,
//! chromedriver started on a free port by the test), at a phone's 390 × 844 window.
//!
//! The browser itself, and when its tests skip, is in `crate::helpers::browser`.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::json;

use crate::helpers::browser::{Browser, PHONE};
use crate::helpers::{ALICE, Backend, ClientKind, PASSWORD, TestApp, spawn_app};

/// Alice with a connection used by two clients, one of which has a long unbroken name.
async fn alice_with_a_busy_connection(app: &TestApp) {
    let first = app.connected_client(ALICE).await;
    let label = "nightly-report-generator-with-a-very-long-unbroken-label-0123456789";
    let token = app.token_for_client(ALICE, label).await;
    let second = app.mcp_client_with_token(&token, ClientKind::Url).await.unwrap();
    let me = json!({"provider": "demo", "method": "GET", "path": "/me"});
    let error = match second.call("provider_request", me).await {
        Err(rmcp::ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    let url = error.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();
    app.allow_in_browser(&app.browser(), &url, ALICE).await;
    first.close().await;
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn my_connections_fits_a_phone_and_sign_out_works() {
    let Some(browser) = Browser::start(PHONE).await else { return };
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    alice_with_a_busy_connection(&app).await;

    browser.sign_in(&app, ALICE, "/connections").await;
    assert_eq!(browser.js("return screen.width").await, json!(PHONE.0), "a phone-sized screen");
    let listed = browser.js("return document.querySelectorAll('#connections button').length").await;
    assert_eq!(listed, json!(3), "Revoke, and Withdraw for each of the two clients");
    browser.screenshot("connections-phone").await;
    assert_eq!(browser.sideways_overflow().await, Vec::<String>::new(), "/connections on a phone");
    // A way home and a plain Sign out, visible on the page.
    let home = browser.client.find(Locator::Css("nav.top a[href='/']")).await.unwrap();
    assert!(home.is_displayed().await.unwrap());
    let sign_out = browser.client.find(Locator::Id("sign-out")).await.unwrap();
    assert!(sign_out.is_displayed().await.unwrap());
    assert_eq!(sign_out.text().await.unwrap(), "Sign out");

    // The other pages a signed-in person meets fit too.
    for path in ["/", "/connect/not-a-valid-id", "/oauth/callback/problem/other-browser"] {
        browser.open(&app.url(path)).await;
        assert_eq!(browser.sideways_overflow().await, Vec::<String>::new(), "{path} on a phone");
    }

    browser.open(&app.url("/connections")).await;
    browser.client.find(Locator::Id("sign-out")).await.unwrap().click().await.unwrap();
    browser.wait_for_url(&app.url("/")).await;
    let text = browser.js("return document.body.innerText").await;
    assert!(text.as_str().unwrap().contains("You are not signed in"), "{text}");
    // Signed out for real: the page now asks to sign in.
    browser.open(&app.url("/connections")).await;
    assert_eq!(browser.client.current_url().await.unwrap().path(), "/login");

    browser.close().await;
    app.stop().await;
}

// Issue 10: the admin pages in a real browser, at a phone's size. An admin finds Alice's
// grant by search, revokes it, sees it gone and the audit entry; a forged form without the
// CSRF token changes nothing. Screenshots go to target/browser-artifacts/.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_revokes_a_grant_found_by_search_and_a_forged_form_changes_nothing() {
    let Some(browser) = Browser::start(PHONE).await else { return };
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client = app.connected_client(ALICE).await;
    let alice = app.user_id(ALICE).await;
    let grant = app.state.core.store.grants().for_user(&alice).await.unwrap().remove(0);
    app.state.core.store.users().set_admin(&app.user_id(crate::helpers::BOB).await, true).await.unwrap();

    browser.sign_in(&app, crate::helpers::BOB, "/admin").await;
    assert!(browser.text().await.contains("Recent failures"));
    browser.artifact("admin-dashboard-phone").await;
    for path in crate::helpers::admin::ADMIN_GETS {
        browser.open(&app.url(path)).await;
        assert_eq!(browser.sideways_overflow().await, Vec::<String>::new(), "{path} on a phone");
    }

    browser.open(&app.url("/admin/grants")).await;
    browser.client.find(Locator::Id("q")).await.unwrap().send_keys("alice").await.unwrap();
    browser.click("form.search button[type=submit]").await;
    browser.wait_for_url(&app.url("/admin/grants?q=alice")).await;
    assert_eq!(browser.js("return document.querySelectorAll('#rows tr.row').length").await, json!(1));
    assert!(browser.text().await.contains(&grant.id));
    browser.artifact("admin-grants-search-phone").await;
    browser.click("#rows tr.row form[action='/admin/grants/revoke'] button").await;
    browser.wait_for_url(&app.url("/admin/grants?notice=revoked")).await;
    let text = browser.text().await;
    assert!(text.contains("revoked at the provider and deleted") && !text.contains(&grant.id), "{text}");
    assert_eq!(browser.js("return document.querySelectorAll('#rows tr.row').length").await, json!(0), "gone");
    browser.artifact("admin-grant-revoked-phone").await;

    browser.open(&app.url("/admin/audit?q=admin.grant_revoked")).await;
    let text = browser.text().await;
    assert!(text.contains("1 shown") && text.contains("revocation=revoked"), "{text}");
    browser.artifact("admin-audit-phone").await;

    // A page of another site posting to an admin action carries no CSRF token: refused.
    browser.open(&app.url("/admin")).await;
    browser
        .js(&format!(
            "const f = document.createElement('form'); f.method = 'post'; f.action = '/admin/users/disable';
             for (const [n, v] of [['user_id', '{alice}'], ['disabled', 'true']]) {{
                 const i = document.createElement('input'); i.type = 'hidden'; i.name = n; i.value = v; f.appendChild(i); }}
             document.body.appendChild(f); f.submit(); return true;"
        ))
        .await;
    browser.wait_for_url(&app.url("/admin/users/disable")).await;
    assert!(browser.text().await.contains("Form expired"));
    assert!(!app.state.core.store.users().by_id(&alice).await.unwrap().unwrap().is_disabled(), "nothing changed");

    client.close().await;
    browser.close().await;
    app.stop().await;
}

// The user's own flow once, in the browser: the connect link, sign-in, consent, the provider's
// approval, and the success page, each saved to target/browser-artifacts/.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_connects_an_account_in_the_browser_and_each_step_is_saved_as_an_artifact() {
    let Some(browser) = Browser::start(PHONE).await else { return };
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let me = json!({"provider": "demo", "method": "GET", "path": "/me"});
    let error = match client.call("provider_request", me.clone()).await {
        Err(rmcp::ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    let url = error.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();

    browser.open(&url).await;
    assert_eq!(browser.client.current_url().await.unwrap().path(), "/login");
    browser.artifact("flow-1-sign-in").await;
    browser.client.find(Locator::Id("username")).await.unwrap().send_keys(ALICE).await.unwrap();
    browser.client.find(Locator::Id("password")).await.unwrap().send_keys(PASSWORD).await.unwrap();
    browser.click("form[action='/login'] button[type=submit]").await;
    browser.wait_for_url(&url).await;
    assert!(browser.text().await.contains("Approve"));
    browser.artifact("flow-2-consent").await;
    browser.click("button[name=action][value=approve]").await;
    let waited = browser
        .client
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css("button[name=decision][value=approve]"))
        .await;
    assert!(waited.is_ok(), "the demo provider's approval page");
    browser.artifact("flow-3-provider").await;
    browser.click("button[name=decision][value=approve]").await;
    // The callback answers 303 to the clean result page; wait for that address.
    browser.wait_for_url(&format!("{url}/result")).await;
    let text = browser.text().await;
    assert!(text.contains("Connected to"), "the success page: {text}");
    assert!(!browser.client.current_url().await.unwrap().as_str().contains("code="), "a clean address");
    browser.artifact("flow-4-success").await;
    assert_eq!(browser.sideways_overflow().await, Vec::<String>::new());

    assert!(client.call("provider_request", me).await.is_ok(), "the tool works now");
    client.close().await;
    browser.close().await;
    app.stop().await;
}
