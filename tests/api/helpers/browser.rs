//! A real browser for the hosted pages: headless Chromium driven over WebDriver (fantoccini,
//! chromedriver started on a free port by the test).
//!
//! [`Browser::start`] returns `None` after printing `SKIPPED browser: <reason>` when Chromium or
//! chromedriver is missing, unless `REQUIRE_BROWSER=1` (CI, see `.ci/run`), where it fails
//! instead. Debian: `apt-get install chromium chromium-driver`; `CHROMIUM` and `CHROMEDRIVER`
//! name other binaries.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::{PASSWORD, TestApp};

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

pub fn binary(env: &str, candidates: &[&str]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(env).map(PathBuf::from) {
        return path.is_file().then_some(path);
    }
    let dirs: Vec<PathBuf> = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    candidates.iter().flat_map(|name| dirs.iter().map(move |dir| dir.join(name))).find(|path| path.is_file())
}

/// Skips (or, with `REQUIRE_BROWSER=1`, fails) the calling test.
pub fn unavailable(reason: String) -> Option<Browser> {
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
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
