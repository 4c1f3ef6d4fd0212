//! The admin pages: every page an admin may open and every form they post, and a browser
//! signed in as an admin.

use super::{BOB, TestApp};

pub const ADMIN_GETS: &[&str] = &[
    "/admin",
    "/admin/orgs",
    "/admin/users",
    "/admin/grants",
    "/admin/authorizations",
    "/admin/consents",
    "/admin/clients",
    "/admin/services",
    "/admin/servers",
    "/admin/providers",
    "/admin/audit",
    "/admin/webhooks",
];
pub const ADMIN_POSTS: &[&str] = &[
    "/admin/grants/revoke",
    "/admin/consents/withdraw",
    "/admin/authorizations/expire",
    "/admin/users/disable",
    "/admin/webhooks/resend",
];

/// Bob made admin and signed in; returns his browser.
pub async fn admin_browser(app: &TestApp) -> reqwest::Client {
    let bob = app.user_id(BOB).await;
    assert!(app.state.core.store.users().set_admin(&bob, true).await.unwrap());
    let browser = app.browser();
    assert_eq!(app.sign_in(&browser, BOB, "/admin").await.status(), 303);
    browser
}
