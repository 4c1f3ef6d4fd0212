//! Guessing one account's password from many addresses: the account's budget throttles the
//! guesses while the owner's own browser still signs in, and every failed sign-in is audited
//! with the username, the address and the reason, never the password.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use oauth_broker::web::throttle::ACCOUNT_BUDGET;

use crate::helpers::{ALICE, BOB, PASSWORD, TestApp, hidden_field};
use crate::on_both_backends;

/// A browser whose connections come from `ip` (any 127.0.0.0/8 address reaches the server on
/// Linux), keeping its cookies in `jar` (so one browser can change networks).
fn browser_at(ip: &str, jar: Arc<reqwest::cookie::Jar>) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(ip.parse::<IpAddr>().unwrap())
        .cookie_provider(jar)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// Fills in and posts the sign-in form.
async fn try_sign_in(app: &TestApp, browser: &reqwest::Client, username: &str, password: &str) -> reqwest::Response {
    let page = browser.get(app.url("/login?next=/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csrf = hidden_field(&page.text().await.unwrap(), "csrf_token").unwrap();
    browser
        .post(app.url("/login"))
        .form(&[("username", username), ("password", password), ("next", "/"), ("csrf_token", &csrf)])
        .send()
        .await
        .unwrap()
}

async fn failed_sign_ins(app: &TestApp) -> Vec<oauth_broker::store::audit::AuditEntry> {
    let entries = app.state.core.store.audit().entries(None, 1000).await.unwrap();
    entries.into_iter().filter(|e| e.action == "browser.sign_in_failed").collect()
}

async fn many_addresses_guessing_one_account_are_throttled_while_the_owner_still_signs_in(app: &TestApp) {
    // Arrange: the owner signed in once, from home, in this browser.
    let owners_jar = Arc::new(reqwest::cookie::Jar::default());
    let home = browser_at("127.0.0.200", owners_jar.clone());
    assert_eq!(try_sign_in(app, &home, ALICE, PASSWORD).await.status(), 303);

    // Act: 30 addresses × 4 wrong passwords, each address under its own limit.
    let mut refused = 0;
    let mut checked = 0;
    for i in 2..32 {
        let attacker = browser_at(&format!("127.0.0.{i}"), Arc::default());
        for guess in 0..4 {
            match try_sign_in(app, &attacker, ALICE, &format!("guess-{i}-{guess}")).await.status().as_u16() {
                401 => checked += 1,
                429 => refused += 1,
                other => panic!("unexpected {other}"),
            }
        }
    }

    // Assert: only the account budget reached the password check.
    assert_eq!(checked, ACCOUNT_BUDGET, "120 guesses, {checked} checked");
    assert_eq!(refused, 120 - ACCOUNT_BUDGET);
    // A new browser at a new address waits too, even with the right password, and is told how long.
    let stranger = try_sign_in(app, &browser_at("127.0.0.99", Arc::default()), ALICE, PASSWORD).await;
    assert_eq!(stranger.status(), 429);
    assert!(stranger.headers()["retry-after"].to_str().unwrap().parse::<i64>().unwrap() > 0);
    // The owner's browser, now on another network, is recognised by its device cookie.
    let travelling = browser_at("127.0.0.201", owners_jar);
    let signed_in = try_sign_in(app, &travelling, ALICE, PASSWORD).await;
    assert_eq!(signed_in.status(), 303, "the owner's browser gets through");
    // The owner's home address, cookies cleared, is recognised too.
    assert_eq!(try_sign_in(app, &browser_at("127.0.0.200", Arc::default()), ALICE, PASSWORD).await.status(), 303);
    // Other accounts are untouched.
    assert_eq!(try_sign_in(app, &browser_at("127.0.0.98", Arc::default()), BOB, PASSWORD).await.status(), 303);
    // Every refusal is in the audit log.
    assert_eq!(failed_sign_ins(app).await.len(), 121);
}
on_both_backends!(account_budget, many_addresses_guessing_one_account_are_throttled_while_the_owner_still_signs_in);

async fn failed_sign_ins_are_audited_with_username_address_and_reason_but_never_the_password(app: &TestApp) {
    let browser = app.browser();
    // Unknown user (with a bidi override and far too long), wrong password, then throttled.
    let spoof = format!("mallory\u{202e}nimda{}", "x".repeat(200));
    assert_eq!(try_sign_in(app, &browser, &spoof, "secret-guess-0").await.status(), 401);
    for i in 1..=5 {
        assert_eq!(try_sign_in(app, &browser, ALICE, &format!("secret-guess-{i}")).await.status(), 401);
    }
    assert_eq!(try_sign_in(app, &browser, ALICE, "secret-guess-6").await.status(), 429);

    let mut entries = failed_sign_ins(app).await;
    entries.reverse();
    assert_eq!(entries.len(), 7, "{entries:?}");
    let alice = app.user_id(ALICE).await;
    let detail = |i: usize| entries[i].detail.clone().unwrap();

    assert_eq!(entries[0].user_id, None);
    assert!(detail(0).starts_with("username=\"mallory\\u{202e}nimda"), "{}", detail(0));
    assert!(detail(0).ends_with("…\" address=127.0.0.1 reason=unknown_user"), "{}", detail(0));
    assert!(!detail(0).contains('\u{202e}'), "the override is escaped");
    assert!(detail(0).len() < 150, "the username is bounded: {}", detail(0));
    for entry in &entries[1..6] {
        assert_eq!(entry.user_id.as_deref(), Some(alice.as_str()), "attempts on an account are in its trail");
        assert_eq!(entry.detail.as_deref(), Some("username=\"alice\" address=127.0.0.1 reason=wrong_password"));
    }
    assert_eq!(detail(6), "username=\"alice\" address=127.0.0.1 reason=throttled:account_address");
    assert_eq!(entries[6].user_id.as_deref(), Some(alice.as_str()));
    let everything = serde_json::to_string(&app.state.core.store.audit().entries(None, 1000).await.unwrap()).unwrap();
    assert!(!everything.contains("secret-guess"), "no password in the audit log");
}
on_both_backends!(
    failed_sign_in_audit,
    failed_sign_ins_are_audited_with_username_address_and_reason_but_never_the_password
);
