//! The hosted pages in a real browser: headless Chromium driven over WebDriver (fantoccini,
//! chromedriver started on a free port by the test), at a phone's 390 × 844 window.
//!
//! [`Browser::start`] is the reusable part: it returns `None` after printing
//! `SKIPPED browser: <reason>` when Chromium or chromedriver is missing, unless
//! `REQUIRE_BROWSER=1` (CI, see `.ci/run`), where it fails instead. Debian: `apt-get install
//! chromium chromium-driver`; `CHROMIUM` and `CHROMEDRIVER` name other binaries.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::helpers::{ALICE, Backend, ClientKind, PASSWORD, TestApp, spawn_app};

/// A phone held upright (an iPhone 12–15's CSS pixels).
pub const PHONE: (u32, u32) = (390, 844);
/// A laptop's browser window.
pub const DESKTOP: (u32, u32) = (1280, 800);

/// Headless Chromium under WebDriver, with its chromedriver; ended by [`Browser::close`] (or
/// killed on drop).
pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

fn binary(env: &str, candidates: &[&str]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(env).map(PathBuf::from) {
        return path.is_file().then_some(path);
    }
    let dirs: Vec<PathBuf> = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    candidates.iter().flat_map(|name| dirs.iter().map(move |dir| dir.join(name))).find(|path| path.is_file())
}

/// Skips (or, with `REQUIRE_BROWSER=1`, fails) the calling test.
fn unavailable(reason: String) -> Option<Browser> {
    if std::env::var("REQUIRE_BROWSER").is_ok_and(|v| v == "1") {
        panic!("REQUIRE_BROWSER=1 but {reason}");
    }
    eprintln!("SKIPPED browser: {reason}");
    None
}

impl Browser {
    /// Starts chromedriver on a free port and opens a headless Chromium window of `width` ×
    /// `height` CSS pixels.
    pub async fn start((width, height): (u32, u32)) -> Option<Self> {
        let Some(chromium) = binary("CHROMIUM", &["chromium", "chromium-browser", "google-chrome"]) else {
            return unavailable("no chromium found (apt-get install chromium, or set CHROMIUM)".into());
        };
        let Some(chromedriver) = binary("CHROMEDRIVER", &["chromedriver"]) else {
            return unavailable("no chromedriver found (apt-get install chromium-driver, or set CHROMEDRIVER)".into());
        };
        let port = free_port();
        let mut driver = match Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
        {
            Ok(driver) => driver,
            Err(error) => return unavailable(format!("{} did not start: {error}", chromedriver.display())),
        };
        // chromedriver says when it listens; wait for that line rather than for a while.
        let stdout = driver.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let started = tokio::time::timeout(Duration::from_secs(30), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("started successfully") {
                    return true;
                }
            }
            false
        })
        .await;
        if started != Ok(true) {
            return unavailable(format!("{} did not report listening on port {port}", chromedriver.display()));
        }
        // Keep draining its output so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

        let profile = tempfile::tempdir().unwrap();
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new",
                    // Root in a container has no user namespace sandbox; the pages are ours.
                    "--no-sandbox",
                    "--disable-dev-shm-usage",
                    "--disable-gpu",
                    "--no-first-run",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.path().display()),
                ],
                // Chromium's windows are at least 500 px wide, even headless: a phone's viewport
                // comes from device emulation (which also honours `<meta name="viewport">`, as a
                // phone does).
                "mobileEmulation": {
                    "deviceMetrics": {"width": width, "height": height, "pixelRatio": 3.0, "mobile": true, "touch": true},
                },
            },
        });
        let Value::Object(mut capabilities) = capabilities else { unreachable!() };
        // A desktop is a plain window (which the test may resize); only a phone is emulated.
        if width >= DESKTOP.0
            && let Some(Value::Object(options)) = capabilities.get_mut("goog:chromeOptions")
        {
            options.remove("mobileEmulation");
        }
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|error| panic!("chromedriver on port {port} opened no browser session: {error}"));
        Some(Browser { client, driver, _profile: profile })
    }

    /// Opens `url` and returns once the page has loaded.
    pub async fn open(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// Runs `script` (a function body that `return`s) in the page.
    pub async fn js(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.unwrap()
    }

    /// Signs `name` in through the login form, as a person would, and waits for the page the
    /// form leads to (`next`).
    pub async fn sign_in(&self, app: &TestApp, name: &str, next: &str) {
        self.open(&app.url(&format!("/login?next={next}"))).await;
        self.client.find(Locator::Id("username")).await.unwrap().send_keys(name).await.unwrap();
        self.client.find(Locator::Id("password")).await.unwrap().send_keys(PASSWORD).await.unwrap();
        self.client
            .find(Locator::Css("form[action='/login'] button[type=submit]"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        self.wait_for_url(&app.url(next)).await;
    }

    /// Waits (at most 20 s) until the address bar shows `url` (after a click that navigates).
    pub async fn wait_for_url(&self, url: &str) {
        let url = url::Url::parse(url).unwrap();
        let waited = self.client.wait().at_most(Duration::from_secs(20)).for_url(&url).await;
        let now = self.client.current_url().await.unwrap();
        assert!(waited.is_ok(), "still at {now}, expected {url}");
    }

    /// Whether the page fits its window sideways: nothing scrolls horizontally, and every
    /// button lies inside both the window and the page's card (`main`). Returns what does not.
    pub async fn sideways_overflow(&self) -> Vec<String> {
        let report = self
            .js(r#"
                // A phone lays a too-wide page out wider than its screen (and zooms out), so the
                // screen's width is the measure, not only the window's.
                const width = Math.min(window.innerWidth, screen.width);
                const problems = [];
                const page = document.documentElement.scrollWidth;
                if (page > width) problems.push(`the page is ${page}px wide on a ${width}px screen`);
                if (window.innerWidth > screen.width) problems.push(`the layout is ${window.innerWidth}px wide on a ${screen.width}px screen`);
                const card = document.querySelector('main').getBoundingClientRect();
                for (const button of document.querySelectorAll('button')) {
                    const r = button.getBoundingClientRect();
                    const name = button.textContent.trim();
                    if (r.left < 0 || r.right > width) problems.push(`button "${name}" spans ${r.left}..${r.right} of ${width}px`);
                    if (r.left < card.left || r.right > card.right) problems.push(`button "${name}" sticks out of the card`);
                }
                return problems;
            "#)
            .await;
        serde_json::from_value(report).unwrap()
    }

    /// With `BROWSER_SCREENSHOTS=DIR`, saves what the window shows as `DIR/NAME.png` (to look at
    /// a failure, or at a new page); otherwise does nothing.
    pub async fn screenshot(&self, name: &str) {
        if let Some(dir) = std::env::var_os("BROWSER_SCREENSHOTS") {
            let png = self.client.screenshot().await.unwrap();
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(PathBuf::from(dir).join(format!("{name}.png")), png).unwrap();
        }
    }

    /// Saves what the window shows as `target/browser-artifacts/NAME.png`, always: the test
    /// artifacts CI keeps (and [`Self::screenshot`]'s copy when `BROWSER_SCREENSHOTS` is set).
    pub async fn artifact(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/browser-artifacts");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
        self.screenshot(name).await;
    }

    /// The page's visible text.
    pub async fn text(&self) -> String {
        self.js("return document.body.innerText").await.as_str().unwrap().to_owned()
    }

    /// Clicks the first element `css` selects (and does not wait: follow with
    /// [`Self::wait_for_url`]).
    pub async fn click(&self, css: &str) {
        self.client.find(Locator::Css(css)).await.unwrap().click().await.unwrap();
    }

    pub async fn close(mut self) {
        let _ = self.client.close().await;
        let _ = self.driver.kill().await;
    }
}

/// A port nobody listens on right now (the OS picks it; chromedriver binds it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

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
    for path in crate::admin::ADMIN_GETS {
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
